package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/recovery"
)

// Startup index recovery (issue 5, spec §1.2 step 4 and §11.3). The seed order, which Run
// encodes (run.go), is:
//
//	New joins the bus → EnableKVEvents (listeners buffer) → Recover → OpenGate → ServeSnapshots → sweep
//
// Recover fetches one peer's index whole — over HTTP from --indexer-peers, else (or also, when
// forced) over NATS from a live replica — stages it partition by partition outside the engine
// lock, and installs each partition under the lock only once the whole fetch succeeded. It never
// fails the startup: without a usable peer the replica starts empty. /ready answers 503 from
// New (with Recovery.Enabled) or the start of Recover until Recover has submitted the recovered
// index.

// NATSRecoveryMode selects when Recover asks live replicas over NATS.
type NATSRecoveryMode string

// NATS recovery modes (--nats-recovery).
const (
	// NATSRecoveryAuto asks replicas over NATS only when no HTTP peer is configured.
	NATSRecoveryAuto NATSRecoveryMode = "auto"
	// NATSRecoveryOff never uses NATS for recovery.
	NATSRecoveryOff NATSRecoveryMode = "off"
	// NATSRecoveryForce uses NATS when no HTTP peer is configured and also after every HTTP
	// peer failed.
	NATSRecoveryForce NATSRecoveryMode = "force"
)

// RecoveryConfig (Config.Recovery) configures startup recovery.
type RecoveryConfig struct {
	// Enabled makes Run recover the index before it opens the KV-event gate, and /ready report
	// not ready from New until then.
	Enabled bool
	// HTTPPeers are --indexer-peers base URLs, tried in order.
	HTTPPeers []string
	// NATS selects NATS recovery (--nats-recovery, default auto). It needs a transport
	// (WithTransport).
	NATS NATSRecoveryMode
	// MaxChunk is the NATS chunk body limit: recovery.ChunkLimit(nc.MaxPayload()). Required for
	// NATS recovery.
	MaxChunk int
	// DiscoveryWait is how long NATS recovery waits for a first live replica to show up when it
	// knows none (0: start empty at once when alone).
	DiscoveryWait time.Duration
	// HTTPTimeout bounds one HTTP peer (default 10 s); NATSDeadline the whole NATS fetch
	// (default 2 min).
	HTTPTimeout  time.Duration
	NATSDeadline time.Duration
	// Limits bound each fetched document.
	Limits recovery.Limits
}

// RecoveryStatus is the outcome of startup recovery (the optional "recovery" object of
// GET /ready).
type RecoveryStatus struct {
	// State is "pending" (expected, not submitted yet), "running", or "done".
	State string `json:"state"`
	// Source is "http", "nats", or "none" (started empty).
	Source string `json:"source,omitempty"`
	// Peer is the URL or replica id recovered from.
	Peer       string  `json:"peer,omitempty"`
	Bytes      int64   `json:"bytes"`
	Partitions int     `json:"partitions"`
	Events     int     `json:"events"`
	Blocks     int     `json:"blocks"`
	Entries    int     `json:"entries"`
	Rejected   int     `json:"rejected_partitions"`
	DurationMS float64 `json:"duration_ms"`
	Error      string  `json:"error,omitempty"`
}

// Recovery states.
const (
	recoveryPending = "pending"
	recoveryRunning = "running"
	recoveryDone    = "done"
)

// recoveryState tracks recovery for readiness. It has its own mutex (a leaf: never held while
// taking Service.mu) so Ready and Recover do not contend on the engine lock.
type recoveryState struct {
	mu     sync.Mutex
	status *RecoveryStatus // nil: no recovery expected
	server *recovery.SnapshotServer
}

// submitted reports whether readiness may be granted (no recovery expected, or it is done).
func (r *recoveryState) submitted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status == nil || r.status.State == recoveryDone
}

// snapshot returns a copy of the status (nil when no recovery is expected).
func (r *recoveryState) snapshot() *RecoveryStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status == nil {
		return nil
	}
	c := *r.status
	return &c
}

func (r *recoveryState) set(st RecoveryStatus) {
	r.mu.Lock()
	r.status = &st
	r.mu.Unlock()
}

// expectRecovery marks startup recovery as pending: Ready reports not ready until Recover has
// submitted (New calls it with Recovery.Enabled, so an HTTP server started before Run answers
// 503). Calling it after Recover finished is a no-op.
func (s *Service) expectRecovery() {
	s.rec.mu.Lock()
	if s.rec.status == nil {
		s.rec.status = &RecoveryStatus{State: recoveryPending}
	}
	s.rec.mu.Unlock()
}

// RecoveryStatus returns the recovery outcome, or nil when no recovery was expected.
func (s *Service) RecoveryStatus() *RecoveryStatus { return s.rec.snapshot() }

// recoveryReady folds the recovery state into a readiness answer (called by Ready).
func (s *Service) recoveryReady(r *Readiness) {
	r.Recovery = s.rec.snapshot()
	if !s.rec.submitted() {
		r.Ready = false
	}
}

// Recover runs startup recovery as configured and installs what it fetched. It always ends in
// state "done": failures are logged and the replica starts empty. It returns the final status.
func (s *Service) Recover(ctx context.Context, cfg RecoveryConfig) RecoveryStatus {
	start := time.Now()
	s.rec.set(RecoveryStatus{State: recoveryRunning})
	st := RecoveryStatus{State: recoveryDone, Source: "none"}
	mode := cfg.NATS
	if mode == "" {
		mode = NATSRecoveryAuto
	}
	var errs []error
	done := false
	if !s.cfg.Engine.UseKVEvents {
		errs = append(errs, fmt.Errorf("%w: recovery skipped", engine.ErrRecoveryDisabled))
		done = true
	}
	if !done && len(cfg.HTTPPeers) > 0 {
		res, installed, err := s.RecoverHTTP(ctx, cfg.HTTPPeers, recovery.HTTPOptions{Timeout: cfg.HTTPTimeout, Limits: cfg.Limits})
		if err == nil {
			st.fill(res, installed)
			done = true
		} else {
			errs = append(errs, err)
		}
	}
	useNATS := mode == NATSRecoveryForce || (mode == NATSRecoveryAuto && len(cfg.HTTPPeers) == 0)
	if !done && useNATS {
		res, installed, err := s.RecoverNATS(ctx, cfg)
		if err == nil {
			st.fill(res, installed)
		} else {
			errs = append(errs, err)
		}
	}
	if st.Source == "none" && len(errs) > 0 {
		st.Error = errors.Join(errs...).Error()
	}
	st.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	s.rec.set(st)
	s.log.Info("index recovery submitted", "source", st.Source, "peer", st.Peer, "bytes", st.Bytes,
		"partitions", st.Partitions, "events", st.Events, "blocks", st.Blocks, "entries", st.Entries,
		"rejected_partitions", st.Rejected, "duration_ms", st.DurationMS, "err", st.Error)
	return st
}

func (st *RecoveryStatus) fill(res recovery.Result, installed installReport) {
	st.Source, st.Peer = res.Source, res.Peer
	st.Bytes, st.Events, st.Blocks = res.Stats.Bytes, res.Stats.Events, res.Stats.Blocks
	st.Partitions, st.Entries = installed.partitions, installed.entries
	st.Rejected = res.Stats.Rejected + installed.rejected
}

// RecoverHTTP fetches the first working peer's /dump and installs it. On error nothing was
// installed.
func (s *Service) RecoverHTTP(ctx context.Context, peers []string, opts recovery.HTTPOptions) (recovery.Result, installReport, error) {
	if opts.Logger == nil {
		opts.Logger = s.log.With("component", "recovery")
	}
	sink := newStagingSink(s)
	res, err := recovery.FetchHTTP(ctx, peers, sink, opts)
	if err != nil {
		return res, installReport{}, err
	}
	return res, sink.commit(), nil
}

// RecoverNATS pulls a snapshot from a live replica over the bus and installs it. It needs a
// transport (WithTransport). On error nothing was installed; an error wrapping recovery.ErrNoPeer
// means nobody could answer (alone on the bus).
func (s *Service) RecoverNATS(ctx context.Context, cfg RecoveryConfig) (recovery.Result, installReport, error) {
	br, ok := s.repl.(*BusReplicator)
	if !ok {
		return recovery.Result{Source: "nats"}, installReport{}, fmt.Errorf("%w: replication over NATS is not enabled", recovery.ErrNoPeer)
	}
	sink := newStagingSink(s)
	res, err := recovery.FetchNATS(ctx, sink, recovery.NATSOptions{
		Requester: br.r, Candidates: br.snapshotCandidates, DiscoveryWait: cfg.DiscoveryWait,
		Probe:    br.r.ProbeSnapshotSource,
		MaxChunk: cfg.MaxChunk, Deadline: cfg.NATSDeadline, Limits: cfg.Limits,
		Logger: s.log.With("component", "recovery"),
	})
	if err != nil {
		return res, installReport{}, err
	}
	return res, sink.commit(), nil
}

// snapshotCandidates lists the replicas to ask for a snapshot: configured peers first, then the
// other live members, without duplicates or this replica.
func (br *BusReplicator) snapshotCandidates() []string {
	self := br.r.ReplicaID()
	out := []string{}
	for _, p := range br.r.Peers() {
		if p != self && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, m := range br.r.Members() {
		if m.ID != self && !slices.Contains(out, m.ID) {
			out = append(out, m.ID)
		}
	}
	return out
}

// ServeSnapshots makes this replica answer NATS snapshot requests from its index. Call it once
// the replica's own recovery is done (a replica that is still recovering must not be asked: it
// has no responder, so requesters get "no responders" at once and move on).
func (s *Service) ServeSnapshots(opts recovery.ServerOptions) error {
	br, ok := s.repl.(*BusReplicator)
	if !ok {
		return fmt.Errorf("%w: snapshots travel over NATS replication", ErrReplicaSyncDisabled)
	}
	if opts.Logger == nil {
		opts.Logger = s.log.With("component", "snapshot-server")
	}
	srv := recovery.NewSnapshotServer(s.writeDump, opts)
	if err := br.r.ServeSnapshot(srv.Handle); err != nil {
		return err
	}
	// Answer "who serves snapshots?" too, so that a replica starting later finds this one at
	// once instead of waiting for a heartbeat (see bus/snapshot_probe.go).
	if err := br.r.ServeSnapshotProbe(); err != nil {
		return err
	}
	s.rec.mu.Lock()
	s.rec.server = srv
	s.rec.mu.Unlock()
	return nil
}
