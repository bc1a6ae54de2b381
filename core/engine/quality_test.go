package engine

import (
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// Routing quality counts every booking exactly once, whichever way it books: a two-phase
// booking (POST /select with a selection_id, then the replayed POST /reservations) moves the
// counters by what a select_and_reserve of the same request moves them, on both selection
// paths; the /select alone and a rejected replay move nothing.

// qualityEngine has three single-rank workers; worker 1 caches 4 blocks (16 tokens) of the
// test prompt on the device tier, worker 2 the first 2 blocks, worker 3 nothing. Session
// affinity is on, and session "s3" is bound to worker 3 by one booking (which it keeps, so the
// binding has a lease).
func qualityEngine(t *testing.T) *Engine {
	t.Helper()
	c := DefaultConfig()
	c.SessionAffinityTTL = 60 * time.Second
	e := newEngine(t, &c)
	for id := uint64(1); id <= 3; id++ {
		mustUpsert(t, e, spec(id))
	}
	store(t, e, kvwire.Owner{Worker: 1}, toks(0, 16))
	store(t, e, kvwire.Owner{Worker: 2}, toks(0, 8))
	bind := sessReq("bind", "s3", toks(1000, 8))
	bind.AllowedWorkerIDs = []uint64{3}
	if r, err := e.SelectAndReserve(bind, t0); err != nil || r.WorkerID != 3 {
		t.Fatalf("binding s3: %+v, %v", r, err)
	}
	return e
}

func qualityOf(e *Engine) RoutingQuality { return e.parts[defKey].quality }

// minus is the change from before to q.
func (q RoutingQuality) minus(before RoutingQuality) RoutingQuality {
	return RoutingQuality{
		Bookings: q.Bookings - before.Bookings, AchievedTokens: q.AchievedTokens - before.AchievedTokens,
		AvailableTokens: q.AvailableTokens - before.AvailableTokens, NotMaxOverlap: q.NotMaxOverlap - before.NotMaxOverlap,
	}
}

func TestTwoPhaseBookingCountsQualityLikeSelectAndReserve(t *testing.T) {
	prompt := toks(0, 16)
	cases := []struct {
		name    string
		fast    bool // the selection must take the fast path
		disable bool // force the general path for a fast-eligible request
		req     func() *SelectRequest
		want    RoutingQuality // the one booking's contribution
	}{
		{"fast/max-overlap", true, false, func() *SelectRequest { return selReq("b", prompt) },
			RoutingQuality{Bookings: 1, AchievedTokens: 16, AvailableTokens: 16}},
		{"fast/allowed-mask", true, false, func() *SelectRequest {
			r := selReq("b", prompt)
			r.AllowedWorkerIDs = []uint64{2, 3} // worker 1's 16 tokens are not available
			return r
		}, RoutingQuality{Bookings: 1, AchievedTokens: 8, AvailableTokens: 8}},
		{"fast/session-binding", true, false, func() *SelectRequest { return sessReq("b", "s3", prompt) },
			RoutingQuality{Bookings: 1, AchievedTokens: 0, AvailableTokens: 16, NotMaxOverlap: 1}},
		{"general/forced", false, true, func() *SelectRequest { return selReq("b", prompt) },
			RoutingQuality{Bookings: 1, AchievedTokens: 16, AvailableTokens: 16}},
		{"general/pinned", false, false, func() *SelectRequest {
			r := selReq("b", prompt)
			r.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(2)), DPRank: ptr(uint32(0))}
			return r
		}, RoutingQuality{Bookings: 1, AchievedTokens: 8, AvailableTokens: 16, NotMaxOverlap: 1}},
		{"general/affinity-target", false, false, func() *SelectRequest {
			r := selReq("b", prompt)
			r.AllowedWorkerIDs = []uint64{1, 3}
			r.AffinityTarget = &AffinityTarget{WorkerID: ptr(uint64(3))}
			return r
		}, RoutingQuality{Bookings: 1, AchievedTokens: 0, AvailableTokens: 16, NotMaxOverlap: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// One engine books with select_and_reserve, an identical one in two phases.
			one, two := qualityEngine(t), qualityEngine(t)
			one.scratch.fast.disabled, two.scratch.fast.disabled = tc.disable, tc.disable
			before := qualityOf(one)
			if qualityOf(two) != before {
				t.Fatalf("identical engines differ before booking: %+v vs %+v", qualityOf(two), before)
			}

			hits := one.scratch.fast.hits
			booked, err := one.SelectAndReserve(tc.req(), t0)
			noErr(t, err)
			if fast := one.scratch.fast.hits > hits; fast != tc.fast {
				t.Fatalf("select_and_reserve took the fast path: %v, want %v", fast, tc.fast)
			}
			if got := qualityOf(one).minus(before); got != tc.want {
				t.Fatalf("select_and_reserve moved quality by %+v, want %+v", got, tc.want)
			}

			hits = two.scratch.fast.hits
			sel, err := two.Select(tc.req(), t0)
			noErr(t, err)
			if fast := two.scratch.fast.hits > hits; fast != tc.fast {
				t.Fatalf("/select took the fast path: %v, want %v", fast, tc.fast)
			}
			if sel.WorkerID != booked.WorkerID || sel.DPRank != booked.DPRank {
				t.Fatalf("/select chose %d/%d, select_and_reserve %d/%d", sel.WorkerID, sel.DPRank, booked.WorkerID, booked.DPRank)
			}
			if got := qualityOf(two); got != before {
				t.Fatalf("/select (which books nothing) moved quality: %+v, want %+v", got, before)
			}
			res, err := two.Reserve(&ReservationRequest{SelectionID: ptr("b")}, t0)
			noErr(t, err)
			if res.WorkerID != booked.WorkerID {
				t.Fatalf("replay booked %d, want %d", res.WorkerID, booked.WorkerID)
			}
			if got, want := qualityOf(two), qualityOf(one); got != want {
				t.Fatalf("two-phase booking: quality %+v, select_and_reserve %+v", got, want)
			}

			// The selection is spent: a second replay is rejected and counts nothing.
			_, err = two.Reserve(&ReservationRequest{SelectionID: ptr("b")}, t0)
			wantErr(t, err, ErrNotFound)
			if got, want := qualityOf(two), qualityOf(one); got != want {
				t.Fatalf("a repeated replay moved quality: %+v, want %+v", got, want)
			}
		})
	}
}

// TestRejectedReplayCountsNoQuality: a replay that books nothing — expired, refused by hard
// session affinity, or onto a worker that left — leaves the counters alone, and so does the
// /select before it.
func TestRejectedReplayCountsNoQuality(t *testing.T) {
	t.Run("expired", func(t *testing.T) {
		e := qualityEngine(t)
		before := qualityOf(e)
		_, err := e.Select(selReq("b", toks(0, 16)), t0)
		noErr(t, err)
		_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("b")}, t0.Add(e.cfg.SelectionCacheTTL+time.Second))
		wantErr(t, err, ErrNotFound)
		if got := qualityOf(e); got != before {
			t.Fatalf("expired replay moved quality: %+v, want %+v", got, before)
		}
	})
	t.Run("hard-session-affinity", func(t *testing.T) {
		e := qualityEngine(t)
		// The /select caches worker 1 for session s; a booking then binds s to worker 2.
		sel, err := e.Select(sessReq("b", "s", toks(0, 16)), t0)
		noErr(t, err)
		if sel.WorkerID != 1 {
			t.Fatalf("/select chose %d, want the max-overlap worker 1", sel.WorkerID)
		}
		moved := sessReq("r", "s", toks(0, 16))
		moved.AllowedWorkerIDs = []uint64{2}
		_, err = e.SelectAndReserve(moved, t0)
		noErr(t, err)
		before := qualityOf(e)
		_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("b")}, t0)
		wantErr(t, err, ErrBadRequest, "session s is bound to worker 2")
		if got := qualityOf(e); got != before {
			t.Fatalf("rejected replay moved quality: %+v, want %+v", got, before)
		}
	})
	t.Run("worker-gone", func(t *testing.T) {
		e := qualityEngine(t)
		_, err := e.Select(selReq("b", toks(0, 16)), t0)
		noErr(t, err)
		before := qualityOf(e)
		if _, err := e.DeleteWorker(1); err != nil {
			t.Fatal(err)
		}
		_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("b")}, t0)
		wantErr(t, err, ErrNotFound)
		if got := qualityOf(e); got != before {
			t.Fatalf("rejected replay moved quality: %+v, want %+v", got, before)
		}
	})
}
