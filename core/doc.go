// Package core is kvselect as a Go library: the selection service that the kvselect binary
// serves over HTTP, embeddable in gateways, endpoint pickers and schedulers written in Go.
//
// # Lifecycle
//
// One Config (config.go) holds the whole service: the router (Config.Engine: Dynamo's
// KvRouterConfig, the router queue, policy classes, table limits), KV-event ingestion,
// replication (Config.Replication), startup recovery (Config.Recovery) and the sweep.
// ConfigFromEnv reads Dynamo's DYN_ROUTER_* variables into it and the kvselect binary overlays
// its flags; Config.Validate refuses a bad setting with an error naming its flag or variable.
// New validates it and, given a transport (WithTransport over bus.NewNATSTransport, or
// bus.NewMemNetwork().Connect() in memory), joins the replicas' bus; without one the service is
// local. core never sees a *nats.Conn: the binary dials NATS (bus.Connect, the embedded server
// of bus/natsembed) and hands the transport over. Run encodes the startup order — KV-event
// listeners buffer, the index is recovered from a peer (Recovery.Enabled), the gate opens, this
// replica serves snapshots, the sweep starts — then serves until ctx ends and shuts down in
// reverse (Close). After Close, selections fail with ErrNotReady ("selection service is
// shutting down").
//
//	cfg, err := core.ConfigFromEnv(os.LookupEnv, log) // log warns about values it ignores
//	...
//	svc, err := core.New(cfg, core.WithTransport(bus.NewNATSTransport(nc))) // no option: local only
//	...
//	go http.Serve(ln, api.New(svc, api.Options{})) // /ready answers 503 until recovery is done
//	err = svc.Run(ctx)                             // returns once ctx ended and the service closed
//
// NewLocal is a service for tests: no replication, no listeners, no background work. The steps
// Run takes (EnableKVEvents, Recover, OpenGate, ServeSnapshots, Start) stay exported for tests
// and embedders that drive them one by one.
//
// Every operation of the HTTP API is a method with typed requests and responses (the JSON types
// of Dynamo's selection service): UpsertWorker, PatchWorker, DeleteWorker, Workers, Ready,
// Select, SelectAndReserve (and their router-queue forms SelectWait, SelectAndReserveWait),
// Reserve, PrefillComplete, OutputBlock, Free, Loads, PotentialLoads,
// OverlapScores, Dump, RegisterPeer, DeregisterPeer, Peers, Members. Errors wrap one of the
// sentinels (ErrBadRequest, ErrUnprocessable, ErrNotFound, ErrConflict, ErrNotReady,
// ErrNoEndpoints, ErrOverloaded, ErrInternal); match them with errors.Is. The HTTP layer
// (package http/api) maps them to status codes in one table and is otherwise a thin adapter.
//
// # Router queue
//
// With router_queue_threshold set, or policy classes (DYN_ROUTER_POLICY_CONFIG), a selection
// that finds every eligible rank busy under its class's rule waits in a per-partition router
// queue (fcfs, lcfs, wspt or aging within a class, with priority_jump and strict_priority;
// deficit round robin across classes) and is selected and booked as soon as a rank has room.
// The queue, its order, class budgets and admission are engine state (core/engine/rqueue*.go:
// engine.SelectQueued parks and returns a ticket, and each dispatch is an Admission in the
// engine's outbox); the Service only waits (queue_wait.go): SelectWait and SelectAndReserveWait,
// which the HTTP API uses, return when flushLocked hands over the Admission, the context ends,
// or the service closes. Select and SelectAndReserve never wait: they fail with ErrOverloaded
// (429) instead.
//
// # Concurrency
//
// All methods are safe for concurrent use. The selection engine (package core/engine) is a
// pure, single-threaded state machine; the Service owns it behind one mutex, held for the
// duration of one engine call (microseconds). Every method follows one pattern: lock, one
// engine call, flushLocked, unlock. The engine returns its effects as data in one outbox
// (engine.Ready: replica lifecycle events, session bindings, router-queue admissions), and
// flushLocked drains it once per call: it hands events and bindings to the replicator and
// admissions to their parked callers. Long prompts are hashed before the lock is taken
// (prehash.go). KV-event listeners decode batches on their own
// goroutines and take the mutex only to apply them; replication publishes through bounded
// queues and never blocks a selection; /dump copies one partition at a time under the lock and
// encodes outside it.
//
// # Custom routing strategies
//
// Config.Scoring adds weighted Scorers (per-candidate cost contributions) and a Picker to the
// built-in pipeline; see engine.Scoring for the pipeline and the contract implementations must
// honour, and package core/scoretest for a conformance harness. The built-in cost is
// Dynamo's formula (engine.PolicyDynamo) or kvselect's estimated-time-to-first-token policy
// (engine.PolicyKVSelect); engine.DynamoScorer and engine.KVSelectScorer expose them as scorers.
//
// # What is replicated, what is local
//
// With replication enabled (New given a transport), replicas share one NATS bus. BusReplicator
// (replication.go) translates between engine events and bus envelopes; the bus package knows
// nothing of the engine. Replicated (best effort, unsequenced,
// fire-and-forget, as in Dynamo): booking admissions, prefill completions and frees (including
// expiry frees), session-affinity bindings, and AIBrix session bindings (EnableAIBrixSessions).
// After a reconnect or a peer's (re)start, each replica republishes its own live admissions, so
// load lost while the bus was down heals (replication_resync.go), and it periodically announces
// the ids of its live bookings so that peers release those whose frees were lost and ask for a
// republish of admissions they missed (replication_liveset.go). Local to each replica: output-block updates
// (high frequency, by design), the pending-selection cache behind the replay form of
// POST /reservations, and the worker catalog — register the same catalog on every replica.
// The KV index is built on every replica from the workers' own ZMQ events; a replica that starts
// late recovers it from a peer (HTTP /dump or a NATS snapshot) before applying live events.
package core
