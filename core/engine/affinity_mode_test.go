package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// modeEngine is sessionEngine with an explicit affinity mode.
func modeEngine(t *testing.T, mode string) *Engine {
	t.Helper()
	c := DefaultConfig()
	c.SessionAffinityTTL = 60 * time.Second
	c.SessionAffinityMode = mode
	e := newEngine(t, &c)
	mustUpsert(t, e, spec(1))
	mustUpsert(t, e, spec(2))
	return e
}

// boundSession books session s on a worker of e, frees the booking (the binding stays, idle)
// and returns the bound worker.
func boundSession(t *testing.T, e *Engine) uint64 {
	t.Helper()
	first, err := e.SelectAndReserve(sessReq("r1", "s", toks(0, 8)), t0)
	noErr(t, err)
	noErr(t, e.Free("r1"))
	return first.WorkerID
}

func sessionOwner(e *Engine, session string) (kvwire.Owner, bool) {
	b, ok := e.parts[PartitionKey{Model: DefaultName, Group: DefaultName}].sessions[session]
	if !ok {
		return kvwire.Owner{}, false
	}
	return b.owner, true
}

func TestSessionAffinityModeDefaultsToHard(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, &c)
	if !e.hardSessions() {
		t.Fatal("the default session affinity mode must be hard (Dynamo's default)")
	}
	c.SessionAffinityMode = "sticky"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `invalid session affinity mode "sticky"; expected 'hard' or 'soft'`) {
		t.Fatalf("bad mode: %v", err)
	}
}

// TestHardModeRejectsDispatchAwayFromALiveBinding mirrors Dynamo's
// hard_mode_rejects_dispatch_away_from_a_live_binding: allowed_worker_ids that exclude the bound
// worker make selection land elsewhere, and hard affinity rejects that booking with 400; the
// stale idle binding is dropped, so the session's next request re-initializes.
func TestHardModeRejectsDispatchAwayFromALiveBinding(t *testing.T) {
	for _, mode := range []string{"", SessionAffinityHard} {
		t.Run(fmt.Sprintf("mode=%q", mode), func(t *testing.T) {
			e := modeEngine(t, mode)
			bound := boundSession(t, e)
			other := 3 - bound
			req := sessReq("r2", "s", toks(0, 8))
			req.AllowedWorkerIDs = []uint64{other}
			_, err := e.SelectAndReserve(req, t0)
			want := fmt.Sprintf("session s is bound to worker %d, not %d", bound, other)
			if !errors.Is(err, ErrBadRequest) || err.Error() != want {
				t.Fatalf("err = %v, want 400 %q", err, want)
			}
			if len(e.resv) != 0 {
				t.Fatalf("a rejected booking must book nothing: %v", e.resv)
			}
			if _, ok := sessionOwner(e, "s"); ok {
				t.Fatal("the stale binding must be dropped")
			}
			req = sessReq("r3", "s", toks(0, 8))
			req.AllowedWorkerIDs = []uint64{other}
			third, err := e.SelectAndReserve(req, t0)
			noErr(t, err)
			if o, _ := sessionOwner(e, "s"); third.WorkerID != other || o.Worker != other {
				t.Fatalf("re-initialized on %d, bound to %d; want %d", third.WorkerID, o.Worker, other)
			}
		})
	}
}

// TestHardModeKeepsALeasedBinding: a binding whose requests are still running is not dropped by
// a rejected booking; the session keeps routing to it.
func TestHardModeKeepsALeasedBinding(t *testing.T) {
	e := modeEngine(t, SessionAffinityHard)
	first, err := e.SelectAndReserve(sessReq("r1", "s", toks(0, 8)), t0)
	noErr(t, err)
	req := sessReq("r2", "s", toks(0, 8))
	req.AllowedWorkerIDs = []uint64{3 - first.WorkerID}
	if _, err := e.SelectAndReserve(req, t0); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("err = %v, want 400", err)
	}
	if o, ok := sessionOwner(e, "s"); !ok || o.Worker != first.WorkerID {
		t.Fatal("a leased binding must survive the rejection")
	}
	again, err := e.SelectAndReserve(sessReq("r3", "s", toks(0, 8)), t0)
	noErr(t, err)
	if again.WorkerID != first.WorkerID {
		t.Fatalf("session moved to %d, want %d", again.WorkerID, first.WorkerID)
	}
}

// TestSoftModeFollowsTheDispatch mirrors soft_mode_follows_the_dispatch: soft rebinds.
func TestSoftModeFollowsTheDispatch(t *testing.T) {
	e := modeEngine(t, SessionAffinitySoft)
	bound := boundSession(t, e)
	other := 3 - bound
	req := sessReq("r2", "s", toks(0, 8))
	req.AllowedWorkerIDs = []uint64{other}
	second, err := e.SelectAndReserve(req, t0)
	noErr(t, err)
	if o, _ := sessionOwner(e, "s"); second.WorkerID != other || o.Worker != other {
		t.Fatalf("soft: booked %d, bound %d; want %d", second.WorkerID, o.Worker, other)
	}
}

// TestTwoPhaseReplayRejectsAWorkerTheSessionLeft mirrors
// two_phase_replay_rejects_a_worker_the_session_left: a /select cached worker A for session s,
// then another booking bound s to B; the replayed POST /reservations is rejected with 400 and
// books nothing. In soft mode the same replay books and rebinds (kvselect's rule before modes).
func TestTwoPhaseReplayRejectsAWorkerTheSessionLeft(t *testing.T) {
	for _, mode := range []string{SessionAffinityHard, SessionAffinitySoft} {
		t.Run(mode, func(t *testing.T) {
			e := modeEngine(t, mode)
			cached, err := e.Select(sessReq("pending", "s", toks(0, 8)), t0)
			noErr(t, err)
			other := 3 - cached.WorkerID
			req := sessReq("r1", "s", toks(0, 8))
			req.AllowedWorkerIDs = []uint64{other}
			_, err = e.SelectAndReserve(req, t0)
			noErr(t, err)
			noErr(t, e.Free("r1"))

			key := PartitionKey{Model: DefaultName, Group: DefaultName}
			replay := &ReservationRequest{SelectionID: ptr("pending")}
			_, err = e.Reserve(replay, t0)
			if mode == SessionAffinitySoft {
				noErr(t, err)
				if o, _ := sessionOwner(e, "s"); o.Worker != cached.WorkerID {
					t.Fatalf("soft replay must rebind to %d, bound to %d", cached.WorkerID, o.Worker)
				}
				return
			}
			want := fmt.Sprintf("session s is bound to worker %d, not %d", other, cached.WorkerID)
			if !errors.Is(err, ErrBadRequest) || err.Error() != want {
				t.Fatalf("err = %v, want 400 %q", err, want)
			}
			if len(e.resv) != 0 {
				t.Fatalf("the rejected replay booked: %v", e.resv)
			}
			if ps, _ := e.pending.peek(key, "pending", t0); ps != nil {
				t.Fatal("the rejected selection must be spent, not retryable onto the stale worker")
			}
		})
	}
}

// TestHardModeRejectsADPRankTheSessionLeft: the rank is part of the binding.
func TestHardModeRejectsADPRankTheSessionLeft(t *testing.T) {
	e := modeEngine(t, SessionAffinityHard)
	p := e.parts[PartitionKey{Model: DefaultName, Group: DefaultName}]
	p.sessions["s"] = &binding{owner: kvwire.Owner{Worker: 1, Rank: 1}}
	err := e.checkDispatch(p, "s", kvwire.Owner{Worker: 1, Rank: 0}, t0)
	if !errors.Is(err, ErrBadRequest) || err.Error() != "session s is bound to DP rank 1, not 0" {
		t.Fatalf("err = %v", err)
	}
}

// TestHardModeEnforcesAMirroredBinding: a binding applied from a peer is as exact as a local
// one — a booking that cannot reach its worker is rejected, one that can sticks to it.
func TestHardModeEnforcesAMirroredBinding(t *testing.T) {
	for _, mode := range []string{SessionAffinityHard, SessionAffinitySoft} {
		t.Run(mode, func(t *testing.T) {
			e := modeEngine(t, mode)
			key := PartitionKey{Model: DefaultName, Group: DefaultName}
			if !e.ApplyAffinity(&AffinityEvent{Partition: key, SessionID: "s", Owner: kvwire.Owner{Worker: 2}, Sequence: 1, Writer: 99, Sender: "peer"}, t0) {
				t.Fatal("mirrored binding not applied")
			}
			if mode == SessionAffinityHard {
				// The mirrored binding steers an unrestricted booking, which then holds a lease.
				got, err := e.SelectAndReserve(sessReq("r0", "s", toks(0, 8)), t0)
				noErr(t, err)
				if got.WorkerID != 2 {
					t.Fatalf("mirrored binding ignored: booked %d, want 2", got.WorkerID)
				}
				req := sessReq("r1", "s", toks(0, 8))
				req.AllowedWorkerIDs = []uint64{1}
				if _, err := e.SelectAndReserve(req, t0); !errors.Is(err, ErrBadRequest) || err.Error() != "session s is bound to worker 2, not 1" {
					t.Fatalf("err = %v, want 400", err)
				}
				return
			}
			req := sessReq("r1", "s", toks(0, 8))
			req.AllowedWorkerIDs = []uint64{1}
			_, err := e.SelectAndReserve(req, t0)
			noErr(t, err)
			if o, _ := sessionOwner(e, "s"); o.Worker != 1 {
				t.Fatalf("soft must rebind the mirrored session to 1, got %d", o.Worker)
			}
		})
	}
}

// TestHardModeIgnoresAnExpiredBinding: an idle binding past its deadline (not yet swept) does
// not constrain a booking.
func TestHardModeIgnoresAnExpiredBinding(t *testing.T) {
	e := modeEngine(t, SessionAffinityHard)
	bound := boundSession(t, e)
	e.Sweep(t0) // stamps the idle deadline t0+60s
	req := sessReq("r2", "s", toks(0, 8))
	req.AllowedWorkerIDs = []uint64{3 - bound}
	_, err := e.SelectAndReserve(req, t0.Add(61*time.Second))
	noErr(t, err)
}
