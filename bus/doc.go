// Package bus is kvselect's replica clustering transport over NATS.
//
// Replicas of one selector cluster share a NATS bus. Over it they fan out
// booking lifecycle events (admission, prefill complete, free) and
// session-affinity bindings, announce themselves with heartbeats and live
// sets, and serve index snapshots to recovering peers (the bytes only: the
// snapshot protocol is package recovery's). Everything here is best-effort
// and unsequenced by contract, exactly core NATS's at-most-once delivery: a
// dropped event is a temporary load divergence that later events and
// snapshots repair, never an error surfaced to a selection.
//
// # Pieces
//
//   - [Connect] dials an external NATS (or, through [InProcessServer], the
//     embedded server of bus/natsembed in process)
//     with the options a long-lived replica needs: reconnect forever, no
//     reconnect buffer (stale events are dropped, not replayed), fast stale
//     connection detection, and handlers that log through slog and count.
//   - [Subjects] builds the versioned, cluster-scoped subject names.
//   - [Lifecycle], [Affinity], [Heartbeat], [LiveSet] and [ResyncRequest]
//     are the wire messages, each a versioned msgpack envelope with a hand-written, forward-tolerant codec
//     ([Encoder], [Decoder]); the exact bytes are pinned by golden files.
//     A new message type is a MsgType constant, its body type in its own file
//     and one entry in msgKinds (envelope.go), which names its stream.
//   - [Transport] is the seam between the replicator and NATS; [NATSTransport]
//     implements it over a *nats.Conn and [MemNetwork] in memory. Both pass
//     the same conformance suite. core takes a Transport
//     (core.WithTransport), never a connection.
//   - [Members] is a pure membership table (no goroutines, no clock): it
//     tracks live replicas from heartbeats, expires silent ones and reports
//     restarts (a new boot id for a known replica id).
//   - [Replicator] ties them together for the core service: non-blocking
//     publishing through a bounded queue, inbound callbacks from a single
//     goroutine through bounded queues, echo and non-peer filtering, peer
//     management and heartbeats.
//
// # Identity
//
// A replica id is an opaque string (a Dynamo-style "tcp://host:port" works).
// Each replica publishes on v2 subjects that end in its id's sender token
// ([EncodeSenderToken], a readable reversible escaping; subjects_v2.go), so
// that NATS permissions can let each replica publish only as itself
// (bus/natsembed enforces them on the embedded server). Receivers
// take the sender from the subject and drop envelopes claiming another
// (counted as impersonations); the v1 subjects, which carry no identity, are
// accepted only with [Config.LegacyV1] and never for an id already heard on
// v2. The snapshot subject addresses a replica by [ReplicaToken], a hash of
// its id. Each process also draws a random 64-bit boot id at start.
// (replica id, boot id) identifies one incarnation: receivers drop their own
// echoes by it, and a changed boot id for a known replica means that replica
// restarted and everything it booked is gone.
//
// # Liveness
//
// A member silent for [Config.DeadAfter] (default three heartbeat periods)
// expires, and core releases the bookings it mirrored from it; while this
// replica is itself disconnected from NATS nobody expires. Membership log
// lines and the embedded server's log are rate-limited ([LogLimiter]).
//
// # Dependencies
//
// This package imports the standard library, kvwire, nats.go, nkeys, yaml and
// msgpack only: never nats-server (bus/natsembed runs the embedded server) and never
// core/ (it speaks its own wire types, and core translates). The test in
// internal/importgraph enforces both.
package bus
