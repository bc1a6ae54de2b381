package engine

import (
	"fmt"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// Session affinity modes (Dynamo's SessionAffinityMode, spec §8): how a live session binding
// treats a booking that would dispatch its session to another rank.
//
//   - hard (the default): the binding is exact. A booking that would dispatch a live session
//     away from its bound (worker, dp_rank) — because allowed_worker_ids or required taints
//     exclude the bound worker, or because a replayed /select chose a worker the session has
//     since left — is rejected with 400 ("session s is bound to worker 1, not 2") and books
//     nothing. An idle binding so contradicted is dropped, so the session's next request
//     re-initializes; a binding with live leases stays (its requests still run there).
//   - soft: the binding follows the dispatch; the session rebinds to where it ran.
//
// Both modes drop a binding whose rank is no longer schedulable and re-initialize the session.
// The mode applies to every binding a replica holds, its own and those mirrored from peers
// (ApplyAffinity): a hard replica enforces a peer's binding exactly as its own. A hard
// rejection is local: peers keep the binding until the session is rebound elsewhere (a newer
// version replaces theirs) or it idles out.
const (
	SessionAffinityHard = "hard"
	SessionAffinitySoft = "soft"
)

// ParseSessionAffinityMode checks a mode value ("" means the default, hard), with Dynamo's
// message.
func ParseSessionAffinityMode(mode string) error {
	switch mode {
	case "", SessionAffinityHard, SessionAffinitySoft:
		return nil
	}
	return fmt.Errorf("invalid session affinity mode %q; expected 'hard' or 'soft'", mode)
}

// hardSessions reports whether session bindings are exact (hard mode).
func (e *Engine) hardSessions() bool { return e.cfg.SessionAffinityMode != SessionAffinitySoft }

// checkDispatch enforces hard affinity before a session's booking on o: a live binding to
// another rank rejects the booking (400, Dynamo's messages). Expired bindings count as absent.
// It changes nothing but the contradicted binding (dropped when idle).
func (e *Engine) checkDispatch(p *partition, session string, o kvwire.Owner, now time.Time) error {
	if session == "" || !e.hardSessions() {
		return nil
	}
	b, ok := p.sessions[session]
	if !ok {
		return nil
	}
	if b.leases == 0 && b.idleAt != 0 && now.UnixNano() >= b.idleAt {
		delete(p.sessions, session) // idle past its TTL: the sweep would reclaim it
		return nil
	}
	if b.owner == o {
		return nil
	}
	bound := b.owner
	if b.leases == 0 {
		delete(p.sessions, session)
	}
	if bound.Worker != o.Worker {
		return badRequest("session %s is bound to worker %d, not %d", session, bound.Worker, o.Worker)
	}
	return badRequest("session %s is bound to DP rank %d, not %d", session, bound.Rank, o.Rank)
}
