package engine

import (
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// Session affinity (spec §8): with a session-affinity TTL configured, each partition keeps a
// table session_id → (worker, rank). select_and_reserve binds a new session to the rank it
// booked and holds a lease until the booking is freed or expires; later requests of the session
// go to the bound rank while it is eligible. /select reads bindings but never creates them. An
// explicit affinity_target or pinned_worker disables session routing for that request.
//
// Idle expiry: when the last lease is released the binding becomes idle; the next Sweep stamps
// its idle deadline (now + TTL) and a later Sweep past the deadline removes it. A binding is thus
// kept between TTL and TTL + the sweep interval after its last release.

// MaxSessionIDBytes is the longest session id affinity tables accept.
const MaxSessionIDBytes = 256

// maxBindings caps one partition's table; when full, new sessions route unpinned.
const maxBindings = 65536

// binding is one session's target.
//
// Invariants: leases ≥ 0; idleAt == 0 while leases > 0 or before the first sweep after the
// last release.
type binding struct {
	owner  kvwire.Owner
	leases int
	idleAt int64  // unix nanos after which an idle binding is reclaimed (0 = not yet stamped)
	seq    uint64 // version: higher wins; ties by writer
	writer uint64
}

// AffinityEvent is a session binding to replicate to (or received from) peers.
type AffinityEvent struct {
	Partition PartitionKey
	SessionID string
	Owner     kvwire.Owner
	Sequence  uint64
	Writer    uint64
	Sender    string // set on received events
}

// sessionsOn reports whether session affinity is configured.
func (e *Engine) sessionsOn() bool { return e.cfg.SessionAffinityTTL > 0 }

// sessionKey returns the request's session id when affinity routing applies to it.
func (e *Engine) sessionKey(req *SelectRequest) (string, error) {
	if !e.sessionsOn() || req.AffinityTarget != nil || req.PinnedWorker != nil {
		return "", nil
	}
	id := req.sessionID()
	if len(id) > MaxSessionIDBytes {
		return "", badRequest("session affinity ID must not exceed %d bytes", MaxSessionIDBytes)
	}
	return id, nil
}

// boundCandidate returns the index of the session's bound rank among the eligible candidates,
// or -1. A binding whose rank is no longer schedulable is dropped.
func (e *Engine) boundCandidate(p *partition, session string, cs []scored) int {
	if session == "" {
		return -1
	}
	b, ok := p.sessions[session]
	if !ok {
		return -1
	}
	j := findCand(cs, b.owner)
	if j < 0 {
		delete(p.sessions, session)
		return -1
	}
	if !cs[j].eligible {
		return -1
	}
	return j
}

// bindSession binds (or refreshes) a session to o and takes a lease for a booking.
func (e *Engine) bindSession(p *partition, session string, o kvwire.Owner, now time.Time) {
	if session == "" {
		return
	}
	b, ok := p.sessions[session]
	if !ok {
		if len(p.sessions) >= maxBindings {
			return // table full: the request routes unpinned
		}
		b = &binding{}
		p.sessions[session] = b
	}
	if b.owner != o || b.leases == 0 {
		e.affSeq = max(e.affSeq+1, uint64(now.UnixNano()))
		b.seq, b.writer = e.affSeq, e.writerID
	}
	b.owner = o
	b.leases++
	b.idleAt = 0
	e.out.Affinity = append(e.out.Affinity, AffinityEvent{Partition: p.key, SessionID: session, Owner: o, Sequence: b.seq, Writer: b.writer})
}

// releaseSession drops a booking's lease.
func (p *partition) releaseSession(session string) {
	if b, ok := p.sessions[session]; ok && b.leases > 0 {
		b.leases--
	}
}

// sweepSessions stamps idle deadlines and reclaims expired idle bindings.
func (p *partition) sweepSessions(now int64, ttl time.Duration) {
	for id, b := range p.sessions {
		switch {
		case b.leases > 0:
		case b.idleAt == 0:
			b.idleAt = now + int64(ttl)
		case now >= b.idleAt:
			delete(p.sessions, id)
		}
	}
}

// ApplyAffinity merges a peer's binding (spec §8): vacant → insert idle; newer version (or same
// target) → replace/refresh; otherwise ignored. Bindings to unknown ranks are dropped.
func (e *Engine) ApplyAffinity(ev *AffinityEvent, now time.Time) bool {
	if !e.sessionsOn() {
		return false
	}
	p := e.parts[ev.Partition]
	if p == nil {
		return false
	}
	if _, ok := p.schedulableRank(ev.Owner); !ok {
		return false
	}
	idle := now.UnixNano() + int64(e.cfg.SessionAffinityTTL)
	b, ok := p.sessions[ev.SessionID]
	switch {
	case !ok:
		if len(p.sessions) >= maxBindings {
			return false
		}
		p.sessions[ev.SessionID] = &binding{owner: ev.Owner, idleAt: idle, seq: ev.Sequence, writer: ev.Writer}
	case b.owner == ev.Owner && (ev.Sequence > b.seq || (ev.Sequence == b.seq && ev.Writer >= b.writer)):
		b.seq, b.writer = ev.Sequence, ev.Writer
		if b.leases == 0 {
			b.idleAt = idle
		}
	case ev.Sequence > b.seq || (ev.Sequence == b.seq && ev.Writer > b.writer):
		b.owner, b.seq, b.writer = ev.Owner, ev.Sequence, ev.Writer
		if b.leases == 0 {
			b.idleAt = idle
		}
	default:
		return false
	}
	return true
}
