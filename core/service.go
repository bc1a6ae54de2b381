package core

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core/engine"
)

// Replicator publishes this replica's lifecycle events to its peers and manages the peer set.
// Implementations must not block in Publish (queue and drop when full).
type Replicator interface {
	Publish(ev *engine.ReplicaEvent)
	PublishAffinity(ev *engine.AffinityEvent)
	AddPeer(id string) (added bool)
	RemovePeer(id string) (removed bool)
	Peers() []string
}

// Service is the embeddable selection service: it owns the engine behind one mutex, runs the
// expiry sweep, feeds KV events from worker listeners into the engine, and exchanges lifecycle
// events with peer replicas. Every method is safe for concurrent use.
//
// Lock order: Service.mu is the only lock that guards engine state. Listener and replicator
// goroutines take it only to apply events; they never hold their own locks while taking it.
type Service struct {
	// catMu serialises catalog changes (upsert, patch, delete) so that the engine update and the
	// listener reconciliation of one change are never interleaved with another's. Lock order:
	// catMu, then mu or kvIngest.mu (never both mu and kvIngest.mu at once).
	catMu   sync.Mutex
	mu      sync.Mutex
	eng     *engine.Engine
	closing bool
	ready   engine.Ready // the engine's outbox, drained by flushLocked (guarded by mu)
	bootID  uint64       // this process's boot id (session-binding writer id)

	// KV ingestion counters (guarded by mu).
	kvStats       engine.KVApplyStats
	kvBatches     uint64
	kvUndecodable uint64

	// Router queue waiting (queue_wait.go; guarded by mu): the parked callers by engine ticket.
	waiters    map[engine.Ticket]*waiter
	queueStats queueCounters
	tooLarge   atomic.Uint64 // requests refused by the per-request limits before the lock (prehash.go)
	// approxDraining: a goroutine is draining deferred approximate indexing (approx_drain.go).
	approxDraining atomic.Bool

	cfg   Config
	log   *slog.Logger
	clock func() time.Time
	repl  Replicator    // nil: replica sync disabled
	tr    bus.Transport // set by WithTransport: New builds repl over it and Close closes that
	kv    *kvIngest     // nil: KV events off or not started
	rec   recoveryState // startup recovery and snapshot serving (recovery.go)
	wf    *workersFile  // nil without a workers file (workersfile.go; guarded by catMu)

	stop    chan struct{}
	started chan struct{} // closed by Run once startup is done (run.go)
	wg      sync.WaitGroup
}

// New builds a Service from cfg (zero fields take DefaultConfig's values; the result must pass
// Validate), reading the tracking key file when keyed tracking hashes are configured. Given a
// transport (WithTransport) it also joins the replicas' bus, so that peers see this replica and
// its bookings from now on; otherwise it starts nothing. Run (or the low-level methods it
// calls) starts the rest.
func New(cfg Config, opts ...Option) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Seed == 0 {
		var b [8]byte
		if _, err := crand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("core: seeding random source: %w", err)
		}
		cfg.Seed = binary.LittleEndian.Uint64(b[:])
	}
	var key []byte
	if cfg.Engine.TrackingHash == engine.TrackingKeyed && cfg.Engine.TrackingKeyFile != "" {
		b, err := os.ReadFile(cfg.Engine.TrackingKeyFile)
		if err != nil {
			return nil, fmt.Errorf("invalid KV router configuration: router_tracking_key_file: %w", err)
		}
		key = b
	}
	pol, err := loadPolicies(&cfg.Engine)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	boot := rng.Uint64() | 1
	eng, err := engine.New(cfg.Engine, engine.Options{Rand: rng, TrackingKey: key, WriterID: boot, Scoring: cfg.Scoring, Policies: pol})
	if err != nil {
		return nil, err
	}
	if cfg.Engine.ApproximateLRUFallbackWarn {
		cfg.Logger.Warn("router_approximate_cache_policy=lru is not supported without KV events; using ttl retention")
	}
	s := &Service{eng: eng, cfg: cfg, log: cfg.Logger, clock: cfg.Clock, stop: make(chan struct{}), started: make(chan struct{}), bootID: boot,
		waiters: map[engine.Ticket]*waiter{}}
	for _, o := range opts {
		o(s)
	}
	if cfg.Recovery.Enabled {
		s.expectRecovery()
	}
	if s.tr != nil {
		if err := s.enableReplication(cfg.Replication, s.tr); err != nil {
			return nil, fmt.Errorf("replication: %w", err)
		}
	}
	return s, nil
}

// NewLocal returns an unsynchronised service for tests and local-only use: no replica sync, no
// KV-event listeners, no background sweep (call Sweep yourself).
func NewLocal(cfg engine.Config, seed uint64) (*Service, error) {
	return New(Config{Engine: cfg, Seed: seed})
}

// Start launches the expiry sweep. It is one step of Run, for tests and embedders that drive
// the startup order themselves.
func (s *Service) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing { // Close won the race: nothing to start
		return
	}
	s.wg.Add(1)
	go s.sweepLoop()
}

// Close stops background work and marks the service as shutting down: later selections get
// 503. The reverse of the startup order: parked requests fail, listeners and the sweep stop, and
// a replicator New created leaves the bus last. It is safe to call more than once.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	s.failQueueLocked(errShuttingDown)
	kv := s.kv
	s.mu.Unlock()
	close(s.stop)
	if kv != nil {
		kv.close()
	}
	s.wg.Wait()
	if br, ok := s.repl.(*BusReplicator); ok && s.tr != nil {
		return br.Close()
	}
	return nil
}

func (s *Service) sweepLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	recheck := time.NewTicker(queueRecheck)
	defer recheck.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if n := s.Sweep(); n > 0 {
				s.log.Info("expired stale bookings", "count", n)
			}
		case <-recheck.C:
			s.recheckQueue()
			s.drainApprox() // deferred approximate indexing a booking left (approx_drain.go)
		}
	}
}

// Sweep reclaims expired bookings, approximate-index entries and pending selections now.
func (s *Service) Sweep() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.eng.Sweep(s.clock())
	s.flushLocked()
	s.drainLocked()
	return n
}

// flushLocked drains the engine's outbox once: replica events and session bindings go to the
// replicator, router-queue admissions to their parked callers. Called with mu held after every
// engine call; the replicator's Publish never blocks.
func (s *Service) flushLocked() {
	s.eng.TakeReady(&s.ready)
	if s.repl != nil {
		for i := range s.ready.Replica {
			s.repl.Publish(&s.ready.Replica[i])
		}
		for i := range s.ready.Affinity {
			s.repl.PublishAffinity(&s.ready.Affinity[i])
		}
	}
	if len(s.ready.Admitted) > 0 {
		s.wakeLocked(s.ready.Admitted)
	}
}

// errShuttingDown is returned by selections after Close.
var errShuttingDown = &engine.Error{Kind: engine.ErrNotReady, Msg: "selection service is shutting down"}

// Engine-facing calls follow one pattern: lock, call, flush effects, unlock.

// Ready reports readiness (GET /ready): ready when not shutting down and at least one worker is
// schedulable.
func (s *Service) Ready() Readiness {
	s.mu.Lock()
	n := s.eng.SchedulableCount()
	closing := s.closing
	s.mu.Unlock()
	recs := s.Workers("", "")
	r := Readiness{Ready: !closing && n > 0, SchedulableWorkers: n, Workers: recs}
	s.recoveryReady(&r)
	return r
}

// Select picks a worker without booking (POST /select).
func (s *Service) Select(req *SelectRequest) (*SelectResponse, error) {
	if err := s.prepare(req.ModelName, req.RoutingGroup, &req.Prompt, req.RouterConfigOverride); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errShuttingDown
	}
	return s.eng.SelectClassified(req, false, s.clock())
}

// SelectAndReserve picks a worker and books the request (POST /select_and_reserve).
func (s *Service) SelectAndReserve(req *SelectRequest) (*SelectResponse, error) {
	if err := s.prepare(req.ModelName, req.RoutingGroup, &req.Prompt, req.RouterConfigOverride); err != nil {
		return nil, err
	}
	defer s.drainApprox() // runs after the unlock below
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errShuttingDown
	}
	resp, err := s.eng.SelectClassified(req, true, s.clock())
	s.flushLocked()
	return resp, err
}

// Reserve books after a /select (POST /reservations).
func (s *Service) Reserve(req *ReservationRequest) (*ReservationResponse, error) {
	if req.WorkerID != nil { // the explicit form carries a prompt
		if err := s.prepare(req.ModelName, req.RoutingGroup, &req.Prompt, req.RouterConfigOverride); err != nil {
			return nil, err
		}
	}
	defer s.drainApprox() // runs after the unlock below
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errShuttingDown
	}
	resp, err := s.eng.Reserve(req, s.clock())
	s.flushLocked()
	return resp, err
}

// PrefillComplete clears a booking's prefill load (replicated).
func (s *Service) PrefillComplete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, _ := s.eng.ReservationPartition(id)
	err := s.eng.PrefillCompleteAt(id, s.clock())
	s.flushLocked()
	if err == nil {
		s.drainPartLocked(k)
	}
	return err
}

// OutputBlock records one output block of a booking (local only).
func (s *Service) OutputBlock(id string, decayFraction *float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.OutputBlock(id, decayFraction)
}

// Free releases a booking (replicated).
func (s *Service) Free(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, _ := s.eng.ReservationPartition(id)
	err := s.eng.Free(id)
	s.flushLocked()
	if err == nil {
		s.drainPartLocked(k)
	}
	return err
}

// Loads returns active load per partition (GET /loads).
func (s *Service) Loads(model, group string) []PartitionLoads {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.Loads(model, group)
}

// LoadsWithSpeeds is Loads with each rank's learned prefill speed (GET /loads).
func (s *Service) LoadsWithSpeeds(model, group string) []PartitionLoads {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.LoadsWithSpeeds(model, group)
}

// PotentialLoads projects a prompt onto every rank (POST /potential_loads).
func (s *Service) PotentialLoads(q *PromptQuery) ([]PotentialLoad, error) {
	if err := s.prepare(q.ModelName, q.RoutingGroup, &q.Prompt, q.RouterConfigOverride); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.PotentialLoads(q)
}

// OverlapScores returns tiered overlap rows for a prompt (POST /overlap_scores).
func (s *Service) OverlapScores(q *PromptQuery) (*OverlapScores, error) {
	if err := s.prepare(q.ModelName, q.RoutingGroup, &q.Prompt, q.RouterConfigOverride); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.OverlapScores(q)
}

// Dump writes the index in Dynamo's recovery format (GET /dump), recovered indexes still waiting
// for their partition included. Each partition is copied out under the lock and encoded outside
// it, so a slow reader never stalls selections for longer than one partition's radix walk.
func (s *Service) Dump(w io.Writer) error {
	return s.writeDump(w) // recovery_dump.go: records copied per partition, encoded outside the lock
}

// ApplyAffinity merges a peer's session binding (called by the replicator's goroutine).
func (s *Service) ApplyAffinity(ev *engine.AffinityEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.ApplyAffinity(ev, s.clock())
}

// ApplyReplica mirrors a peer's lifecycle event (called by the replicator's inbound goroutine).
func (s *Service) ApplyReplica(ev *engine.ReplicaEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.eng.ApplyReplica(ev, s.clock())
	if ev.Kind != engine.LifecycleAdd || (ev.Add != nil && ev.Add.Republish) { // completions, frees and refreshed rows can make room
		s.drainPartLocked(ev.Partition)
	}
	return ok
}

// IsShuttingDown reports whether Close has been called.
func (s *Service) IsShuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}
