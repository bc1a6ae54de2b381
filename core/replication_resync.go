package core

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/kvwire"
)

// Anti-entropy for replica lifecycle sync.
//
// Lifecycle events are fire-and-forget (core NATS, no reconnect buffer): whatever a replica
// publishes while its connection is down, or while a peer's is, never arrives. Nothing in the
// per-event protocol repairs that, so without help a booking admitted on A during a NATS outage
// stays invisible to B until it is freed. The repair rule, deliberately the cheapest one that
// fits the best-effort contract (no sequencing, no acknowledgement, no replay log):
//
//  1. Each replica remembers the admission of every live booking it made itself (the "local
//     ledger": what it would need to re-announce the booking), updated from its own outbound
//     events and from peers' prefill-complete and free events for those ids.
//  2. On a resync trigger it republishes one admission event per ledger entry, carrying the
//     booking's current state (prefill tokens 0 once prefill completed), at a bounded rate.
//     Triggers: its own NATS reconnect (after ResyncDelay, so that peers that reconnect a
//     little later are subscribed again), and a peer joining or restarting (a new or restarted
//     replica learns the bookings that exist already; the pass is repeated after
//     JoinResyncRepeat because the newcomer only accepts admissions once its worker catalog is
//     registered).
//  3. A receiver treats an admission for an id it already mirrors as a refresh: the engine's
//     ApplyReplica replaces the mirrored row (same id, same owner) instead of adding a second
//     booking, so repeating a resync never double-counts load. An admission for an id it does
//     not know (published while it was cut off) simply books it.
//
//  4. A receiver ignores an admission for an id it has seen freed (replication_tombstones.go),
//     so a republish that crosses a free of the same booking cannot resurrect it.
//
// What this does not repair by itself: a free published by the owner during an outage. Live
// sets do (replication_liveset.go): the owner's announcement lists its live bookings and the
// peer releases the rest. A prefill completion lost in an outage is repaired by the republish,
// which carries the booking's current prefill. Republishing is at-most-once like everything
// else; a republish lost again is repaired by the next trigger or not at all.
//
// Ordering: an entry is read and its admission enqueued on the bus while holding Service.mu,
// the same lock under which a local free is enqueued. The bus publishes in queue order from one
// goroutine, so a republished admission can never overtake the free of the same booking and
// resurrect it on a peer.

// Defaults for the resync knobs in ReplicationConfig.
const (
	// DefaultResyncRate bounds republished admissions per second. The bus's outbound queue holds
	// 65536 events; at this rate a resync never fills it on its own.
	DefaultResyncRate = 20_000
	// DefaultResyncDelay is how long a replica waits after its own reconnect before it
	// republishes: peers cut off by the same outage reconnect within one reconnect interval
	// (1 s plus up to 0.5 s jitter) and must be subscribed again to hear it.
	DefaultResyncDelay = 2 * time.Second
	// DefaultJoinResyncDelay is how long a replica waits after a peer joined or restarted: the
	// newcomer's subscriptions must propagate through the NATS cluster first.
	DefaultJoinResyncDelay = 500 * time.Millisecond
	// JoinResyncRepeat is when the pass for a joining or restarted peer is repeated: the
	// newcomer drops admissions for partitions it does not have yet, and registers its worker
	// catalog over HTTP only after it has started (and joined the bus).
	JoinResyncRepeat = 5 * time.Second
	// resyncCoalesce merges requests due this close together into one pass.
	resyncCoalesce = 250 * time.Millisecond
	// maxScheduled bounds the passes waiting to run.
	maxScheduled = 4
	// resyncBatch is how many admissions are enqueued per lock hold.
	resyncBatch = 256
	// ledgerPruneEvery is how often ledger entries older than the expiry guard are dropped, so
	// bookings removed without a free event (their worker was deleted) cannot accumulate.
	ledgerPruneEvery = time.Minute
)

// ResyncTrigger forwards NATS reconnects to a replicator created later: the connection (and its
// OnReconnect callback) must exist before the replicator that uses it. Put Fire in
// bus.ConnConfig.OnReconnect and the trigger in ReplicationConfig.Resync. The zero value is
// ready; Fire before the replicator is attached is a no-op. Safe for concurrent use.
type ResyncTrigger struct {
	br atomic.Pointer[BusReplicator]
}

// Fire schedules a resync after ResyncDelay. It never blocks (nats.go runs it on its shared
// callback goroutine).
func (t *ResyncTrigger) Fire() {
	if br := t.br.Load(); br != nil {
		br.rs.request(br.rs.delay)
	}
}

// localBooking is one ledger entry: the admission to re-announce, with its current prefill.
// The payload sits behind a pointer (one small allocation per booking) because an entry
// holding it by value exceeds the map's inline slot size and costs a larger allocation.
type localBooking struct {
	add      *engine.ReplicaAdd // the ledger's own copy: prefill is cleared in place
	key      engine.PartitionKey
	owner    kvwire.Owner
	id       string
	bs       uint32
	admitted time.Time // service clock at admission, for pruning
}

// event returns the admission event to republish; it owns its payload copy (the bus keeps
// the value it is handed while the ledger may still change the original).
func (b localBooking) event() *engine.ReplicaEvent {
	add := *b.add
	add.Republish = true
	return &engine.ReplicaEvent{Partition: b.key, BlockSize: b.bs, RequestID: b.id, Owner: b.owner,
		Kind: engine.LifecycleAdd, Add: &add}
}

// ledger is the set of live bookings this replica admitted itself, by request id.
//
// Concurrency: guarded by Service.mu. Entries are written by BusReplicator.Publish (called by
// Service.flushLocked with the lock held) and by BusReplicator.apply (which takes the lock), and
// read by the resync goroutine under the lock.
//
// Ownership: an entry's TokenSequence is shared read-only with the engine's booking and with
// events already handed to the bus; nobody writes to it after admission.
type ledger map[string]localBooking

// observeLocal records an outbound event of this replica.
func (l ledger) observeLocal(ev *engine.ReplicaEvent, now time.Time) {
	switch ev.Kind {
	case engine.LifecycleAdd:
		if ev.Add == nil {
			return
		}
		add := *ev.Add
		l[ev.RequestID] = localBooking{add: &add, key: ev.Partition, owner: ev.Owner, id: ev.RequestID,
			bs: ev.BlockSize, admitted: now}
	case engine.LifecyclePrefillComplete:
		l.prefillDone(ev.RequestID)
	case engine.LifecycleFree:
		delete(l, ev.RequestID)
	}
}

// observePeer records a peer's event that the engine applied (for Free and PrefillComplete
// also when it did not: the ledger entry can only be stale then).
func (l ledger) observePeer(ev *engine.ReplicaEvent, applied bool) {
	switch ev.Kind {
	case engine.LifecycleAdd:
		if applied {
			// The peer's admission replaced our row of the same id: it is theirs now.
			delete(l, ev.RequestID)
		}
	case engine.LifecyclePrefillComplete:
		l.prefillDone(ev.RequestID)
	case engine.LifecycleFree:
		delete(l, ev.RequestID)
	}
}

func (l ledger) prefillDone(id string) {
	if e, ok := l[id]; ok {
		e.add.PrefillTokens = 0
	}
}

// prune drops entries admitted before cutoff (the engine has expired those bookings).
func (l ledger) prune(cutoff time.Time) int {
	n := 0
	for id, e := range l {
		if e.admitted.Before(cutoff) {
			delete(l, id)
			n++
		}
	}
	return n
}

// resyncer is the goroutine that republishes the ledger.
//
// Concurrency: request may be called from any goroutine and never blocks. Requests coalesce:
// passes due within resyncCoalesce of each other run once, at the later time, so a
// reconnect's delayed pass is never cut short by an earlier, shorter request.
type resyncer struct {
	br        *BusReplicator
	rate      int           // admissions per second
	delay     time.Duration // wait after a reconnect
	joinDelay time.Duration // wait after a peer joined or restarted
	// joinRepeat is the delay of the repeated join pass after the first one (0 = none). Set
	// before the goroutine starts, read-only afterwards.
	joinRepeat time.Duration
	// liveSetEvery is the period of live-set announcements between passes (0 = none). Set
	// before the goroutine starts, read-only afterwards.
	liveSetEvery time.Duration

	mu   sync.Mutex
	due  []time.Time   // start times of scheduled passes, ascending (guarded by mu)
	wake chan struct{} // capacity 1: "due changed"
	stop chan struct{}
	done chan struct{}
	once sync.Once

	passes       atomic.Uint64 // completed passes
	republished  atomic.Uint64 // admissions enqueued by passes
	pruned       atomic.Uint64 // ledger entries dropped (worker gone or expired)
	lastPassSize atomic.Uint64 // ledger size seen by the last pass
}

// ResyncStats counts the anti-entropy work of a replica.
type ResyncStats struct {
	Passes      uint64 // completed republish passes
	Republished uint64 // admissions republished
	Pruned      uint64 // ledger entries dropped without a free event
	LastPass    uint64 // entries the last pass went through
	Ledger      int    // live local bookings currently remembered
	Tombstones  int    // freed peer bookings currently remembered
	StaleAdds   uint64 // peer admissions ignored because their id had been freed
	// Live sets (replication_liveset.go): partition sets announced, complete peer sets
	// applied, and mirrored bookings freed because a peer's set no longer listed them.
	LiveSetsAnnounced uint64
	LiveSetsApplied   uint64
	LiveSetFreed      uint64
	// Lost admissions: ids peers' live sets listed that this replica did not mirror, resync
	// requests it sent for them, and requests it received from peers.
	LiveSetMissing         uint64
	ResyncRequestsSent     uint64
	ResyncRequestsReceived uint64
}

func newResyncer(br *BusReplicator, rate int, delay, joinDelay time.Duration) *resyncer {
	if rate <= 0 {
		rate = DefaultResyncRate
	}
	return &resyncer{br: br, rate: rate, delay: max(delay, 0), joinDelay: max(joinDelay, 0),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// request schedules a pass d from now. A request due within resyncCoalesce of an already
// scheduled pass merges with it (the pass runs at the later of the two times); at most
// maxScheduled passes are pending, the latest one absorbing any excess.
func (r *resyncer) request(d time.Duration) {
	t := time.Now().Add(d)
	r.mu.Lock()
	merged := false
	for i, due := range r.due {
		if diff := t.Sub(due); diff < resyncCoalesce && diff > -resyncCoalesce {
			if t.After(due) {
				r.due[i] = t
			}
			merged = true
			break
		}
	}
	if !merged {
		if len(r.due) < maxScheduled {
			r.due = append(r.due, t)
		} else if last := len(r.due) - 1; t.After(r.due[last]) {
			r.due[last] = t
		}
		slices.SortFunc(r.due, func(a, b time.Time) int { return a.Compare(b) })
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// next returns the earliest scheduled pass (zero when none), removing it when it is due.
func (r *resyncer) next(now time.Time) (due time.Time, ready bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.due) == 0 {
		return time.Time{}, false
	}
	due = r.due[0]
	if due.After(now) {
		return due, false
	}
	r.due = slices.Delete(r.due, 0, 1)
	return due, true
}

// close stops the goroutine, abandoning a pass in progress, and waits for it.
func (r *resyncer) close() {
	r.once.Do(func() { close(r.stop) })
	<-r.done
}

// run is the resync goroutine.
func (r *resyncer) run() {
	defer close(r.done)
	prune := time.NewTicker(ledgerPruneEvery)
	defer prune.Stop()
	var liveSets <-chan time.Time
	if r.liveSetEvery > 0 {
		t := time.NewTicker(r.liveSetEvery)
		defer t.Stop()
		liveSets = t.C
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, ready := r.next(time.Now())
		if ready {
			if !r.pass() {
				return
			}
			continue
		}
		var fire <-chan time.Time
		if !due.IsZero() {
			timer.Reset(time.Until(due))
			fire = timer.C
		}
		select {
		case <-r.stop:
			return
		case <-prune.C:
			r.pruneExpired()
		case <-liveSets:
			r.announce()
		case <-r.wake:
		case <-fire:
		}
	}
}

// wait sleeps for d unless stopped; it reports whether to go on.
func (r *resyncer) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.stop:
		return false
	case <-t.C:
		return true
	}
}

// pruneExpired drops ledger entries older than the engine's expiry guard.
func (r *resyncer) pruneExpired() {
	s := r.br.svc
	s.mu.Lock()
	n := r.br.ledger.prune(s.clock().Add(-s.eng.Config().ActiveRequestExpiry))
	s.mu.Unlock()
	r.pruned.Add(uint64(n))
}

// pass republishes every ledger entry, resyncBatch at a time, pacing batches to r.rate. It
// reports false when stopped midway.
func (r *resyncer) pass() bool {
	s, br := r.br.svc, r.br
	s.mu.Lock()
	ids := make([]string, 0, len(br.ledger))
	for id := range br.ledger {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	r.lastPassSize.Store(uint64(len(ids)))
	interval := time.Duration(int64(time.Second) * resyncBatch / int64(r.rate))
	sent := 0
	for start := 0; start < len(ids); start += resyncBatch {
		if start > 0 && !r.wait(interval) {
			return false
		}
		end := min(start+resyncBatch, len(ids))
		s.mu.Lock()
		cutoff := s.clock().Add(-s.eng.Config().ActiveRequestExpiry)
		for _, id := range ids[start:end] {
			e, ok := br.ledger[id]
			if !ok {
				continue // freed since the pass began
			}
			if e.admitted.Before(cutoff) || !ownerLive(s.eng, e.key, e.owner) {
				delete(br.ledger, id)
				r.pruned.Add(1)
				continue
			}
			br.publishBus(e.event())
			sent++
		}
		s.mu.Unlock()
	}
	r.republished.Add(uint64(sent))
	r.passes.Add(1)
	r.announce()
	if sent > 0 {
		br.log.Info("resync: republished local bookings", "bookings", sent)
	}
	return true
}

// announce publishes this replica's live sets (replication_liveset.go).
func (r *resyncer) announce() {
	s := r.br.svc
	s.mu.Lock()
	r.br.publishLiveSetsLocked()
	s.mu.Unlock()
}

// ownerLive reports whether rank o is still a schedulable member of partition key. A
// booking whose worker was deleted (or moved) is gone from the engine without a free event.
func ownerLive(eng *engine.Engine, key engine.PartitionKey, o kvwire.Owner) bool {
	rec, ok := eng.Worker(o.Worker)
	if !ok || rec.Lifecycle != engine.LifecycleSchedulable || rec.ModelName != key.Model || rec.RoutingGroup != key.Group {
		return false
	}
	start, size := uint32(0), uint32(1)
	if rec.DataParallelStartRank != nil {
		start = *rec.DataParallelStartRank
	}
	if rec.DataParallelSize != nil {
		size = *rec.DataParallelSize
	}
	return o.Rank >= start && uint64(o.Rank) < uint64(start)+uint64(size)
}

// Resync schedules a republish of this replica's live local bookings after delay (coalescing
// with a pending request). Embedders call it when they know events were lost; the binary calls
// it through ResyncTrigger on every NATS reconnect.
func (br *BusReplicator) Resync(delay time.Duration) { br.rs.request(delay) }

// ResyncStats reports the anti-entropy counters.
func (br *BusReplicator) ResyncStats() ResyncStats {
	br.svc.mu.Lock()
	n, tn, stale, ls := len(br.ledger), br.tomb.len(), br.staleAdds, br.liveSets
	br.svc.mu.Unlock()
	return ResyncStats{
		Passes: br.rs.passes.Load(), Republished: br.rs.republished.Load(), Pruned: br.rs.pruned.Load(),
		LastPass: br.rs.lastPassSize.Load(), Ledger: n, Tombstones: tn, StaleAdds: stale,
		LiveSetsAnnounced: ls.announced, LiveSetsApplied: ls.applied, LiveSetFreed: ls.freed,
		LiveSetMissing: ls.missing, ResyncRequestsSent: ls.requested, ResyncRequestsReceived: ls.asked,
	}
}

// memberChanged republishes when a peer joins or restarts, so it learns the bookings that
// already exist, and forgets the partial live sets of a replica that left or expired. Runs on the bus dispatcher goroutine; it only signals the resync goroutine.
func (br *BusReplicator) memberChanged(c bus.MemberChange) {
	if c.Kind == bus.MemberLeft || c.Kind == bus.MemberExpired {
		br.releasePeer(c) // replication_dead.go
		return
	}
	if c.Kind != bus.MemberJoined && c.Kind != bus.MemberRestarted {
		return
	}
	<-br.ready // br.r is set right after bus.New returns
	if !br.discover && !br.isPeer(c.Member.ID) {
		return
	}
	br.readmitPeer(c)
	br.rs.request(br.rs.joinDelay)
	if br.rs.joinRepeat > 0 {
		br.rs.request(br.rs.joinDelay + br.rs.joinRepeat)
	}
}

// isPeer reports whether id is a configured peer, under its id or an alias it announced.
func (br *BusReplicator) isPeer(id string) bool { return br.r.IsPeer(id) }
