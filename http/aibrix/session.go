package aibrix

import (
	"sync"
	"time"
)

// SessionKey identifies one session of one model. Value is the policy
// context attribute named by Policy.SessionKey; scoping by Model keeps two
// models' sessions with the same id apart.
type SessionKey struct {
	Model string
	Value string
}

// Binding is where a session is pinned: a candidate id and the port chosen
// for it (the port matters when ports map to data-parallel ranks, because
// the KV cache of the session lives on one rank).
type Binding struct {
	CandidateID string
	Port        int
}

// SessionStore remembers session bindings.
//
// Contract for implementations:
//   - Get returns the binding of key if it has not expired at now.
//   - Bind creates or refreshes key's binding; it expires ttl after now.
//   - Both are called concurrently from many requests and must be safe for
//     concurrent use; they must not block on I/O (a decision has a 10 ms
//     budget end to end). A replicated implementation answers from local
//     state and propagates Bind asynchronously.
//   - Time enters only through now; implementations never read the clock.
type SessionStore interface {
	Get(key SessionKey, now time.Time) (Binding, bool)
	Bind(key SessionKey, b Binding, ttl time.Duration, now time.Time)
}

// MemorySessionStore is an in-process [SessionStore] with per-entry TTL and
// a bound on the number of entries. Expired entries are dropped lazily on
// Get and in sweeps triggered by Bind when the store is full; when it is
// still full after a sweep, an arbitrary entry is evicted (affinity is an
// optimisation, so losing one binding is acceptable, unbounded memory is
// not).
//
// One mutex guards the map; all methods are safe for concurrent use.
type MemorySessionStore struct {
	mu         sync.Mutex
	max        int
	entries    map[SessionKey]sessionEntry
	nextSweep  time.Time
	sweepEvery time.Duration
}

// sessionEntry is one binding with its absolute expiry; an entry is live
// while now < expires.
type sessionEntry struct {
	b       Binding
	expires time.Time
}

// DefaultMaxSessions bounds a MemorySessionStore created with max <= 0.
const DefaultMaxSessions = 1 << 20

// NewMemorySessionStore returns an empty store holding at most max entries
// (DefaultMaxSessions when max <= 0).
func NewMemorySessionStore(max int) *MemorySessionStore {
	if max <= 0 {
		max = DefaultMaxSessions
	}
	return &MemorySessionStore{max: max, entries: make(map[SessionKey]sessionEntry), sweepEvery: time.Second}
}

// Get implements [SessionStore].
func (s *MemorySessionStore) Get(key SessionKey, now time.Time) (Binding, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok {
		return Binding{}, false
	}
	if !now.Before(e.expires) {
		delete(s.entries, key)
		return Binding{}, false
	}
	return e.b, true
}

// Bind implements [SessionStore]. A non-positive ttl removes the binding.
func (s *MemorySessionStore) Bind(key SessionKey, b Binding, ttl time.Duration, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ttl <= 0 {
		delete(s.entries, key)
		return
	}
	if _, exists := s.entries[key]; !exists && len(s.entries) >= s.max {
		if !now.Before(s.nextSweep) {
			s.sweepLocked(now)
			s.nextSweep = now.Add(s.sweepEvery)
		}
		for k := range s.entries {
			if len(s.entries) < s.max {
				break
			}
			delete(s.entries, k)
		}
	}
	s.entries[key] = sessionEntry{b: b, expires: now.Add(ttl)}
}

// Len returns the number of stored (possibly expired) entries.
func (s *MemorySessionStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// sweepLocked drops every expired entry; s.mu must be held. It is O(n) and
// therefore runs at most once per sweepEvery, only when the store is full.
func (s *MemorySessionStore) sweepLocked(now time.Time) {
	for k, e := range s.entries {
		if !now.Before(e.expires) {
			delete(s.entries, k)
		}
	}
}
