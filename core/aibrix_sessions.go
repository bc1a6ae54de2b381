package core

import (
	"math"
	"sync"
	"time"
)

// AIBrix session stickiness shared between replicas.
//
// The AIBrix decision handler (http/aibrix) pins a session — the request's model and the value
// of the policy's trusted session attribute — to the candidate "namespace/pod" and port it
// chose, so that the session's next request reuses that pod's KV cache. A gateway spreads its
// requests over every kvselect replica, so the binding must be visible to all of them. The
// engine's affinity tables cannot hold it (they bind sessions to registered worker ranks; an
// AIBrix candidate need not be registered), so this file keeps a separate table with the same
// replication rule as the engine's session bindings (spec §8):
//
//   - every binding carries a version (Sequence, Writer); higher wins, ties by writer;
//   - a local Bind that changes a session's target (or revives an expired one) issues a new
//     version: Sequence = max(last sequence seen or issued + 1, now in unix nanoseconds),
//     Writer = the service's boot id, so it supersedes every binding this replica has seen;
//   - a Bind that keeps the target only refreshes the deadline and keeps the version;
//   - a peer's binding (Apply) is inserted when the session is vacant or expired, refreshes the
//     deadline when it names the same target with a version ≥ the held one, replaces the
//     binding when its version is newer, and is ignored otherwise.
//
// Whether a binding's target may still be used is the handler's business: it honours a binding
// only while the candidate is in the request's candidate set and eligible.
//
// This file is the table alone (no I/O, time enters as arguments); aibrix_sessions_repl.go
// connects it to a Service's replicator.

// AIBrixSessionKey identifies one AIBrix session: the request's model and the value of the
// policy's session attribute. Scoping by model keeps two models' sessions with one id apart.
type AIBrixSessionKey struct {
	Model   string
	Session string
}

// AIBrixTarget is where a session is pinned: a candidate id ("namespace/pod") and the port
// chosen for it (ports map to data-parallel ranks, whose KV caches differ).
type AIBrixTarget struct {
	Candidate string
	Port      uint32
}

// AIBrixSessionEvent is one binding exchanged with peers. TTL is relative (the receiver's
// deadline is its own now + TTL), so replicas' clocks need not agree; TTL 0 removes the
// binding. Sender is set on received events only.
type AIBrixSessionEvent struct {
	Key      AIBrixSessionKey
	Target   AIBrixTarget
	TTL      time.Duration
	Sequence uint64
	Writer   uint64
	Sender   string
}

// AIBrixSessionConfig bounds an [AIBrixSessions] table. The zero value is valid.
type AIBrixSessionConfig struct {
	// MaxEntries bounds the table (default DefaultAIBrixMaxSessions). When it is full, a new
	// session first triggers a sweep of expired entries (at most once per second) and then
	// evicts the soonest-expiring of a few sampled entries: stickiness is an optimisation,
	// unbounded memory is not.
	MaxEntries int
}

// DefaultAIBrixMaxSessions bounds a table whose MaxEntries is not positive (the same bound as
// http/aibrix's in-process store).
const DefaultAIBrixMaxSessions = 1 << 20

// aibrixSweepEvery rate-limits the O(n) sweep of a full table.
const aibrixSweepEvery = time.Second

// aibrixRefreshDivisor: a refresh (same target, same version) is republished only when at
// least ttl/aibrixRefreshDivisor has passed since this replica last published or received the
// binding. Peers then never hold a binding that expires more than a quarter TTL before the
// writer's, while a hot session costs at most a handful of messages per TTL, not one per
// request.
const aibrixRefreshDivisor = 4

// AIBrixSessionStats counts what a table did since it was created.
type AIBrixSessionStats struct {
	Entries   int    // current entries, live or not yet swept
	Binds     uint64 // local binds that issued a new version
	Refreshes uint64 // local binds that kept the target and version
	Published uint64 // events handed to the publisher
	Applied   uint64 // peer events that changed the table
	Ignored   uint64 // peer events ignored (older version, invalid)
	Evicted   uint64 // live entries dropped because the table was full
}

// aibrixEntry is one binding. Times are unix nanoseconds: the binding is live while
// now < expires; pubAt is when this replica last published or received this binding.
type aibrixEntry struct {
	target  AIBrixTarget
	expires int64
	ttl     time.Duration
	seq     uint64
	writer  uint64
	pubAt   int64
}

// deadline is now+ttl in unix nanoseconds, saturating instead of wrapping for a huge ttl.
func deadline(now int64, ttl time.Duration) int64 {
	if now > 0 && int64(ttl) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(ttl)
}

// newer reports whether version (seq, writer) is strictly higher than e's.
func (e *aibrixEntry) newer(seq, writer uint64) bool {
	return seq > e.seq || (seq == e.seq && writer > e.writer)
}

// AIBrixSessions is a bounded, versioned table of AIBrix session bindings whose local binds are
// published to peers and into which peers' binds are applied.
//
// Concurrency: one mutex guards the table; every method is safe for concurrent use and none
// blocks on I/O. The publish function is called after the mutex is released, on the caller's
// goroutine; it must not block (the bus replicator queues and drops when full) and must not
// retain the event after returning.
type AIBrixSessions struct {
	writer  uint64                    // this replica's boot id; immutable
	publish func(*AIBrixSessionEvent) // nil: local only; immutable after construction
	max     int                       // immutable

	mu        sync.Mutex
	entries   map[AIBrixSessionKey]aibrixEntry
	clock     uint64 // highest sequence issued or seen (Lamport clock)
	nextSweep int64  // unix nanos before which a full table is not swept again
	stats     AIBrixSessionStats
}

// NewAIBrixSessions returns an empty table. writer is the version writer of local binds (a
// Service uses its boot id); publish receives every local bind that peers should learn (nil
// keeps the table local). Most callers want [Service.EnableAIBrixSessions] instead.
func NewAIBrixSessions(cfg AIBrixSessionConfig, writer uint64, publish func(*AIBrixSessionEvent)) *AIBrixSessions {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultAIBrixMaxSessions
	}
	return &AIBrixSessions{writer: writer, publish: publish, max: cfg.MaxEntries,
		entries: make(map[AIBrixSessionKey]aibrixEntry)}
}

// Get returns key's binding if it is live at now. An expired binding is dropped.
func (s *AIBrixSessions) Get(key AIBrixSessionKey, now time.Time) (AIBrixTarget, bool) {
	t := now.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok {
		return AIBrixTarget{}, false
	}
	if t >= e.expires {
		delete(s.entries, key)
		return AIBrixTarget{}, false
	}
	return e.target, true
}

// Bind creates, changes or refreshes key's binding so that it expires ttl after now, and
// publishes it when peers need to hear of it (see the file comment). A non-positive ttl
// removes the binding here and, with a new version, at peers. An empty candidate removes the
// binding here only (a removal names its target on the wire).
func (s *AIBrixSessions) Bind(key AIBrixSessionKey, target AIBrixTarget, ttl time.Duration, now time.Time) {
	t := now.UnixNano()
	var ev AIBrixSessionEvent
	send := false
	s.mu.Lock()
	e, ok := s.entries[key]
	switch {
	case target.Candidate == "":
		delete(s.entries, key)
	case ttl <= 0:
		delete(s.entries, key)
		ev, send = s.issueLocked(key, target, 0, t), true
	case ok && t < e.expires && e.target == target: // refresh: same version
		e.expires, e.ttl = deadline(t, ttl), ttl
		s.stats.Refreshes++
		if t-e.pubAt >= int64(ttl/aibrixRefreshDivisor) {
			e.pubAt = t
			ev, send = AIBrixSessionEvent{Key: key, Target: target, TTL: ttl, Sequence: e.seq, Writer: e.writer}, true
		}
		s.entries[key] = e
	default: // new, expired or moved: a new version
		ev, send = s.issueLocked(key, target, ttl, t), true
		s.insertLocked(key, aibrixEntry{target: target, expires: deadline(t, ttl), ttl: ttl,
			seq: ev.Sequence, writer: ev.Writer, pubAt: t}, t)
		s.stats.Binds++
	}
	send = send && s.publish != nil
	if send {
		s.stats.Published++
	}
	s.mu.Unlock()
	if send {
		s.emit(ev)
	}
}

// emit hands ev to the publisher. It takes ev by value so that only binds that publish pay
// for the event escaping to the heap (the publisher is an unknown function).
func (s *AIBrixSessions) emit(ev AIBrixSessionEvent) { s.publish(&ev) }

// issueLocked advances the Lamport clock past every version seen and past now, and returns a
// local event with the new version. s.mu must be held.
func (s *AIBrixSessions) issueLocked(key AIBrixSessionKey, target AIBrixTarget, ttl time.Duration, now int64) AIBrixSessionEvent {
	if s.clock < math.MaxUint64 { // saturate: a hostile peer's MaxUint64 must not wrap us to 0
		s.clock++
	}
	s.clock = max(s.clock, uint64(max(now, 0)))
	return AIBrixSessionEvent{Key: key, Target: target, TTL: ttl, Sequence: s.clock, Writer: s.writer}
}

// Apply merges a peer's binding at the receiver's time now and reports whether the table
// changed. Events without a candidate are ignored. Whatever the outcome, the Lamport clock
// advances past ev's sequence, so this replica's next new binding supersedes it.
func (s *AIBrixSessions) Apply(ev *AIBrixSessionEvent, now time.Time) bool {
	t := now.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = max(s.clock, ev.Sequence)
	if ev.Target.Candidate == "" {
		s.stats.Ignored++
		return false
	}
	e, ok := s.entries[ev.Key]
	evNewer := ok && e.newer(ev.Sequence, ev.Writer)
	same := ok && ev.Sequence == e.seq && ev.Writer == e.writer
	switch {
	case ev.TTL <= 0: // removal: honoured unless this replica holds a newer version
		if !ok || !(evNewer || same) {
			s.stats.Ignored++
			return false
		}
		delete(s.entries, ev.Key)
	case !ok || t >= e.expires: // vacant or expired: take it
		s.insertLocked(ev.Key, aibrixEntry{target: ev.Target, expires: deadline(t, ev.TTL), ttl: ev.TTL,
			seq: ev.Sequence, writer: ev.Writer, pubAt: t}, t)
	case evNewer || (same && e.target == ev.Target):
		// Newer version: replace. Same version and target: a refresh, which never shortens
		// the deadline (a delayed refresh must not undo a later local one).
		exp := deadline(t, ev.TTL)
		if !evNewer {
			exp = max(exp, e.expires)
		}
		e.target, e.seq, e.writer = ev.Target, ev.Sequence, ev.Writer
		e.expires, e.ttl, e.pubAt = exp, ev.TTL, t
		s.entries[ev.Key] = e
	default:
		s.stats.Ignored++
		return false
	}
	s.stats.Applied++
	return true
}

// insertLocked stores e under key, making room first when the table is full: expired entries
// are swept (at most once per aibrixSweepEvery), then sampled entries are evicted
// (evictOneLocked). s.mu must be held.
func (s *AIBrixSessions) insertLocked(key AIBrixSessionKey, e aibrixEntry, now int64) {
	if _, exists := s.entries[key]; !exists && len(s.entries) >= s.max {
		if now >= s.nextSweep {
			s.sweepLocked(now)
			s.nextSweep = now + int64(aibrixSweepEvery)
		}
		for len(s.entries) >= s.max {
			s.evictOneLocked(now)
		}
	}
	s.entries[key] = e
}

// aibrixEvictSample is how many entries an eviction inspects.
const aibrixEvictSample = 8

// evictOneLocked drops the entry that expires soonest among the first aibrixEvictSample
// entries of a map iteration (Go randomises its start): sampled approximation of
// "evict the binding closest to expiry", so recently bound sessions are rarely the victims, at
// O(1) cost. s.mu must be held and the table must not be empty.
func (s *AIBrixSessions) evictOneLocked(now int64) {
	var victim AIBrixSessionKey
	var soonest int64
	n := 0
	for k, e := range s.entries {
		if n == 0 || e.expires < soonest {
			victim, soonest = k, e.expires
		}
		if n++; n == aibrixEvictSample {
			break
		}
	}
	if now < soonest {
		s.stats.Evicted++
	}
	delete(s.entries, victim)
}

// Sweep drops every binding expired at now and returns how many it dropped. The table also
// expires bindings lazily (Get) and sweeps itself when full, so calling Sweep is optional.
func (s *AIBrixSessions) Sweep(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sweepLocked(now.UnixNano())
}

// sweepLocked drops expired entries; O(n). s.mu must be held.
func (s *AIBrixSessions) sweepLocked(now int64) int {
	n := 0
	for k, e := range s.entries {
		if now >= e.expires {
			delete(s.entries, k)
			n++
		}
	}
	return n
}

// Stats returns the table's counters and size.
func (s *AIBrixSessions) Stats() AIBrixSessionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Entries = len(s.entries)
	return st
}
