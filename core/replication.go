package core

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core/engine"
)

// BusReplicator connects a Service to its peers over NATS: local admissions, prefill
// completions and frees are published as versioned lifecycle envelopes, and peers' events are
// mirrored into the engine. It translates between engine events and bus envelopes; the bus
// package knows nothing of the engine.
//
// Concurrency: Publish runs under Service.mu (from flushLocked); inbound callbacks run on the
// bus dispatcher goroutine and take Service.mu themselves; the resync goroutine (see
// replication_resync.go) takes Service.mu per batch. ledger is guarded by Service.mu.
type BusReplicator struct {
	r        *bus.Replicator
	svc      *Service
	log      *slog.Logger
	discover bool
	ledger   ledger      // live local bookings, for resync (guarded by svc.mu)
	tomb     *tombstones // freed peer bookings (guarded by svc.mu)
	// staleAdds counts peer admissions ignored because the id was freed (guarded by svc.mu).
	staleAdds uint64
	// Live sets (replication_liveset.go), guarded by svc.mu: the last set id announced, the
	// peers' sets being reassembled, counters, and scratch for freed ids.
	liveSetSeq     uint64
	pendingSets    map[liveSetKey]*pendingLiveSet
	bounds         pendingBounds
	asks           map[string]*resyncAsk
	liveSets       liveSetStats
	liveSetScratch []string
	rs             *resyncer
	trigger        *ResyncTrigger
	// Dead peers (replication_dead.go), guarded by svc.mu: peers whose bookings were released,
	// by id (value: the boot id they had), and counters.
	released map[string]uint64
	dead     deadPeerStats
	logLimit *bus.LogLimiter // membership INFO lines
	// ready is closed once r is set: bus callbacks may start before bus.New returns, and
	// those that use r wait for it.
	ready chan struct{}
	// appliedHook, when set (benchmarks and tests), sees every peer lifecycle event after the
	// engine handled it, on the dispatcher goroutine.
	appliedHook atomic.Pointer[func(ev *engine.ReplicaEvent, applied bool)]
	// aibrix receives peers' AIBrix session bindings (aibrix_sessions_repl.go); nil until
	// Service.EnableAIBrixSessions attaches a table.
	aibrix    atomic.Pointer[AIBrixSessions]
	closeOnce sync.Once
}

// ReplicationConfig (Config.Replication) configures replica sync: the bus replicator and the
// anti-entropy passes core runs over it.
type ReplicationConfig struct {
	// Bus configures the replicator: Cluster (--cluster), Aliases, HTTPAddr (--advertise-http),
	// Peers (--replica-sync-peers), DiscoverPeers, HeartbeatInterval, DeadAfter
	// (--peer-dead-after: the heartbeat silence after which a peer's mirrored bookings are
	// released, replication_dead.go), LegacyV1 (--bus-v1), MaxMembers (--bus-max-members) and
	// queue sizes. The service sets ReplicaID (Config.ReplicaID), BootID and the callbacks.
	Bus bus.Config

	// Resync, if set, is attached to the replicator so that its Fire (wired into
	// bus.ConnConfig.OnReconnect) schedules a republish of the live local bookings.
	Resync *ResyncTrigger
	// ResyncRate bounds republished admissions per second (default DefaultResyncRate).
	ResyncRate int
	// ResyncDelay is the wait between a reconnect and the republish (default
	// DefaultResyncDelay; negative means none).
	ResyncDelay time.Duration
	// JoinResyncDelay is the wait between a peer joining or restarting and the republish
	// (default DefaultJoinResyncDelay; negative means none).
	JoinResyncDelay time.Duration
	// JoinResyncRepeat is when the join pass is repeated (default JoinResyncRepeat; negative
	// means no repeat).
	JoinResyncRepeat time.Duration
	// MaxPendingLiveSets and MaxPendingLiveSetBytes bound the partial live sets this replica
	// reassembles (defaults DefaultMaxPendingLiveSets, DefaultMaxPendingLiveSetBytes); the
	// oldest partial set is evicted first.
	MaxPendingLiveSets     int
	MaxPendingLiveSetBytes int64
	// LiveSetInterval is how often this replica announces its live bookings so that peers can
	// release bookings whose frees they missed (default DefaultLiveSetInterval; negative: only
	// after republish passes). See replication_liveset.go.
	LiveSetInterval time.Duration
}

// enableReplication wires s to the bus over tr and starts the resync goroutine (New calls it
// when given WithTransport; Close closes the replicator).
func (s *Service) enableReplication(cfg ReplicationConfig, tr bus.Transport) error {
	br := &BusReplicator{svc: s, log: s.log.With("component", "replication"), discover: cfg.Bus.DiscoverPeers, ledger: ledger{},
		tomb: newTombstones(tombstoneCap), ready: make(chan struct{}), pendingSets: map[liveSetKey]*pendingLiveSet{},
		asks: map[string]*resyncAsk{}, released: map[string]uint64{}, logLimit: bus.NewLogLimiter(0, 0)}
	br.rs = newResyncer(br, cfg.ResyncRate, orDefaultDelay(cfg.ResyncDelay, DefaultResyncDelay),
		orDefaultDelay(cfg.JoinResyncDelay, DefaultJoinResyncDelay))
	br.rs.liveSetEvery = orDefaultDelay(cfg.LiveSetInterval, DefaultLiveSetInterval)
	br.bounds.maxSets, br.bounds.maxBytes = cfg.MaxPendingLiveSets, cfg.MaxPendingLiveSetBytes
	switch {
	case cfg.JoinResyncRepeat == 0:
		br.rs.joinRepeat = JoinResyncRepeat
	case cfg.JoinResyncRepeat > 0:
		br.rs.joinRepeat = cfg.JoinResyncRepeat
	}
	bc := cfg.Bus
	bc.ReplicaID, bc.BootID = s.cfg.ReplicaID, s.bootID
	bc.OnLifecycle, bc.OnLiveSet, bc.OnResyncRequest = br.apply, br.applyLiveSet, br.resyncRequested
	bc.OnAffinity, bc.OnPeerRestart, bc.OnMemberChange = br.applyAffinity, br.peerRestarted, br.memberChanged
	r, err := bus.NewWithTransport(bc, tr, s.log)
	if err != nil {
		return err
	}
	br.r = r
	close(br.ready)
	s.mu.Lock()
	s.repl = br
	s.mu.Unlock()
	go br.rs.run()
	if cfg.Resync != nil {
		br.trigger = cfg.Resync
		cfg.Resync.br.Store(br)
	}
	return nil
}

// Replication returns the bus replicator New built over its transport, or nil without one.
func (s *Service) Replication() *BusReplicator {
	br, _ := s.repl.(*BusReplicator)
	return br
}

// orDefaultDelay maps 0 to def and a negative delay to none.
func orDefaultDelay(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Publish implements Replicator: it never blocks (the bus queues and drops when full). It is
// called with Service.mu held and records local admissions, completions and frees in the
// resync ledger.
func (br *BusReplicator) Publish(ev *engine.ReplicaEvent) {
	now := br.svc.clock()
	if _, mine := br.ledger[ev.RequestID]; ev.Kind == engine.LifecycleFree && !mine {
		br.tomb.add(ev.RequestID, now) // a peer's booking freed here
	}
	br.ledger.observeLocal(ev, now)
	br.publishBus(ev)
}

// publishBus translates ev into a bus envelope and queues it.
func (br *BusReplicator) publishBus(ev *engine.ReplicaEvent) {
	lc := &bus.Lifecycle{
		Model: ev.Partition.Model, Group: ev.Partition.Group, BlockSize: ev.BlockSize,
		RequestID: ev.RequestID, Owner: ev.Owner,
	}
	switch ev.Kind {
	case engine.LifecycleAdd:
		lc.Kind = bus.LifecycleAdd
		a := ev.Add
		lc.Add = &bus.AddData{
			TokenSequence: a.TokenSequence, TrackPrefill: a.TrackPrefill, PrefillTokens: a.PrefillTokens,
			ExpectedOutputTokens: a.ExpectedOutputTokens, LoraName: a.LoraName, ISL: a.ISL, Republish: a.Republish,
		}
	case engine.LifecyclePrefillComplete:
		lc.Kind = bus.LifecyclePrefillComplete
	case engine.LifecycleFree:
		lc.Kind = bus.LifecycleFree
	default:
		return
	}
	br.r.PublishLifecycle(lc)
}

// PublishAffinity implements Replicator.
func (br *BusReplicator) PublishAffinity(ev *engine.AffinityEvent) {
	br.r.PublishAffinity(&bus.Affinity{
		Model: ev.Partition.Model, Group: ev.Partition.Group, SessionID: ev.SessionID,
		Owner: ev.Owner, HasRank: true, Sequence: ev.Sequence, Writer: ev.Writer,
	})
}

// applyAffinity merges a peer's session binding: a target binding into the AIBrix session
// table, a worker binding into the engine.
func (br *BusReplicator) applyAffinity(a *bus.Affinity) {
	if a.Target != "" {
		br.applyAIBrixSession(a)
		return
	}
	br.svc.ApplyAffinity(&engine.AffinityEvent{
		Partition: engine.PartitionKey{Model: a.Model, Group: a.Group}, SessionID: a.SessionID,
		Owner: a.Owner, Sequence: a.Sequence, Writer: a.Writer, Sender: a.Sender,
	})
}

// apply mirrors a peer's event (on the bus dispatcher goroutine).
func (br *BusReplicator) apply(lc *bus.Lifecycle) {
	ev := engine.ReplicaEvent{
		Partition: engine.PartitionKey{Model: lc.Model, Group: lc.Group}, BlockSize: lc.BlockSize,
		RequestID: lc.RequestID, Owner: lc.Owner, Sender: lc.Sender,
	}
	switch lc.Kind {
	case bus.LifecycleAdd:
		if lc.Add == nil {
			return
		}
		ev.Kind = engine.LifecycleAdd
		ev.Add = &engine.ReplicaAdd{
			TokenSequence: lc.Add.TokenSequence, TrackPrefill: lc.Add.TrackPrefill, PrefillTokens: lc.Add.PrefillTokens,
			ExpectedOutputTokens: lc.Add.ExpectedOutputTokens, LoraName: lc.Add.LoraName, ISL: lc.Add.ISL, Republish: lc.Add.Republish,
		}
	case bus.LifecyclePrefillComplete:
		ev.Kind = engine.LifecyclePrefillComplete
	case bus.LifecycleFree:
		ev.Kind = engine.LifecycleFree
	default:
		return
	}
	s := br.svc
	s.mu.Lock()
	now := s.clock()
	ok := false
	switch {
	case ev.Kind == engine.LifecycleAdd && ev.Add.Republish && br.tomb.freed(ev.RequestID, now.Add(-s.eng.Config().ActiveRequestExpiry)):
		br.staleAdds++ // a republished admission that crossed its free: stale
	default:
		if _, mine := br.ledger[ev.RequestID]; ev.Kind == engine.LifecycleFree && !mine {
			br.tomb.add(ev.RequestID, now)
		}
		if ev.Kind == engine.LifecycleAdd && !ev.Add.Republish {
			// A new booking reusing a freed id (ids need only be unique while in flight).
			br.tomb.forget(ev.RequestID)
		}
		ok = s.eng.ApplyReplica(&ev, now)
		br.ledger.observePeer(&ev, ok)
		if ev.Kind != engine.LifecycleAdd || (ev.Add != nil && ev.Add.Republish) { // completions, frees and refreshed rows can make room
			s.drainPartLocked(ev.Partition)
		}
	}
	s.mu.Unlock()
	if h := br.appliedHook.Load(); h != nil {
		(*h)(&ev, ok)
	}
	if !ok {
		br.log.Debug("dropped peer lifecycle event", "sender", lc.Sender, "kind", lc.Kind.String(), "request_id", lc.RequestID)
	}
}

// peerRestarted frees the bookings a restarted peer made before it restarted.
func (br *BusReplicator) peerRestarted(id string, prev, boot uint64) {
	br.svc.mu.Lock()
	n := br.svc.eng.DropPeer(id)
	br.dropPendingSets(id)
	br.svc.drainLocked()
	br.svc.mu.Unlock()
	br.logLimit.Log(br.log, slog.LevelInfo, "peer restarted; dropped its mirrored bookings", "peer", id, "bookings", n)
}

// AddPeer implements Replicator.
func (br *BusReplicator) AddPeer(id string) bool { return br.r.AddPeer(id) }

// IsSelf reports whether id names this replica (its id or an alias).
func (br *BusReplicator) IsSelf(id string) bool { return br.r.IsSelf(id) }

// RemovePeer implements Replicator.
func (br *BusReplicator) RemovePeer(id string) bool { return br.r.RemovePeer(id) }

// Peers implements Replicator.
func (br *BusReplicator) Peers() []string { return br.r.Peers() }

// Members lists the replicas seen on the bus.
func (br *BusReplicator) Members() []bus.Member { return br.r.Members() }

// Stats returns the bus counters (published, received, dropped, decode errors).
func (br *BusReplicator) Stats() bus.Stats { return br.r.Stats() }

// Close stops the resync goroutine and replication (publishing the leave message). It
// detaches the ResyncTrigger, so later reconnects are ignored. Service.Close calls it; later
// calls return nil.
func (br *BusReplicator) Close() error {
	var err error
	br.closeOnce.Do(func() {
		if br.trigger != nil {
			br.trigger.br.CompareAndSwap(br, nil)
		}
		br.rs.close()
		err = br.r.Close()
	})
	return err
}

// MemberInfo is one replica seen on the bus (GET /replica_sync/members).
type MemberInfo struct {
	ReplicaID string    `json:"replica_id"`
	BootID    uint64    `json:"boot_id"`
	HTTPAddr  string    `json:"http_addr,omitempty"`
	StartedAt time.Time `json:"started_at"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Peer      bool      `json:"peer"`
}

// Members lists the live replicas seen on the bus, sorted by id ([] when replication is off).
func (s *Service) Members() []MemberInfo {
	br, ok := s.repl.(*BusReplicator)
	if !ok {
		return []MemberInfo{}
	}
	peers := map[string]bool{}
	for _, p := range br.Peers() {
		peers[p] = true
	}
	out := []MemberInfo{}
	for _, m := range br.Members() {
		out = append(out, MemberInfo{
			ReplicaID: m.ID, BootID: m.BootID, HTTPAddr: m.HTTPAddr, StartedAt: time.Unix(0, m.StartedAt).UTC(),
			FirstSeen: m.FirstSeen.UTC(), LastSeen: m.LastSeen.UTC(), Peer: peers[m.ID],
		})
	}
	slices.SortFunc(out, func(a, b MemberInfo) int { return strings.Compare(a.ReplicaID, b.ReplicaID) })
	return out
}
