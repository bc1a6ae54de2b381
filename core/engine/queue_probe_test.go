package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestProbeQueue: the probe measures the prompt and the best effective cached prefix over the
// ranks the request may use, validates as Select does, and leaves no trace (no state change, no
// random draw: two identically seeded engines stay in lockstep when only one is probed).
func TestProbeQueue(t *testing.T) {
	build := func() *Engine {
		cfg := DefaultConfig()
		cfg.QueueThreshold = ptr(0.5)
		e := newEngine(t, &cfg)
		for id := uint64(1); id <= 3; id++ {
			mustUpsert(t, e, spec(id, func(s *WorkerSpec) { s.MaxNumBatchedTokens = ptr(uint64(100)) }))
		}
		store(t, e, kvwire.Owner{Worker: 1}, toks(0, 8))  // 2 blocks
		store(t, e, kvwire.Owner{Worker: 2}, toks(0, 16)) // 4 blocks
		return e
	}
	e, twin := build(), build()
	prompt := toks(0, 22) // 5 full blocks and 2 tokens

	pr, err := e.ProbeQueue(selReq("", prompt))
	noErr(t, err)
	if pr.ISL != 22 || pr.Cached != 16 || pr.Partition != (PartitionKey{Model: DefaultName, Group: DefaultName}) {
		t.Fatalf("probe %+v, want isl 22, cached 16 (worker 2)", pr)
	}
	only1 := selReq("", prompt)
	only1.AllowedWorkerIDs = []uint64{1, 3}
	if pr, err := e.ProbeQueue(only1); err != nil || pr.Cached != 8 {
		t.Fatalf("allowed {1,3}: %+v %v, want cached 8", pr, err)
	}
	none := selReq("", toks(500, 8))
	if pr, err := e.ProbeQueue(none); err != nil || pr.Cached != 0 || pr.ISL != 8 {
		t.Fatalf("uncached prompt: %+v %v", pr, err)
	}
	_, err = e.ProbeQueue(&SelectRequest{})
	wantErr(t, err, ErrBadRequest)
	_, err = e.ProbeQueue(&SelectRequest{ModelName: ptr("other"), Prompt: tokenPrompt(prompt)})
	wantErr(t, err, ErrNotReady)

	// A pinned request is measured on its rank alone.
	pin := selReq("", prompt)
	pin.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(0))}
	if pr, err := e.ProbeQueue(pin); err != nil || pr.Cached != 8 || pr.Busy {
		t.Fatalf("pinned to worker 1: %+v %v, want cached 8, not busy", pr, err)
	}

	// Probing changed nothing a selection can see.
	for i := range 20 {
		req := selReq("", toks(i*3, 12))
		a, errA := e.SelectAndReserve(req, t0)
		b, errB := twin.SelectAndReserve(req, t0)
		noErr(t, errA)
		noErr(t, errB)
		if a.WorkerID != b.WorkerID || *a.SelectionID != *b.SelectionID {
			t.Fatalf("selection %d diverged after probing: %d/%s vs %d/%s", i, a.WorkerID, *a.SelectionID, b.WorkerID, *b.SelectionID)
		}
		noErr(t, e.Free(*a.SelectionID))
		noErr(t, twin.Free(*b.SelectionID))
	}
}

func TestQueueingApplies(t *testing.T) {
	cfg := DefaultConfig()
	off := newEngine(t, &cfg)
	cfg.QueueThreshold = ptr(0.5)
	on := newEngine(t, &cfg)
	plain := selReq("", toks(0, 4))
	adv := selReq("", toks(0, 4))
	adv.Advisory = true
	pinned := selReq("", toks(0, 4))
	pinned.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(0))}
	cases := []struct {
		e       *Engine
		req     *SelectRequest
		booking bool
		want    bool
	}{
		{off, plain, true, false},
		{on, plain, false, true},
		{on, plain, true, true},
		{on, adv, false, false},
		{on, adv, true, true},    // select_and_reserve ignores advisory
		{on, pinned, true, true}, // a pinned request waits for its own rank
	}
	for i, tc := range cases {
		if got := tc.e.QueueingApplies(tc.req, tc.booking); got != tc.want {
			t.Fatalf("case %d: %v, want %v", i, got, tc.want)
		}
	}
}

// TestBusyRuleRatio: with busy_worker_ratio the pool is busy once that share of the eligible
// ranks is busy; the fast path, the general path and ProbeQueue agree on every count.
func TestBusyRuleRatio(t *testing.T) {
	e := newEngine(t, nil)
	for id := uint64(1); id <= 4; id++ {
		mustUpsert(t, e, spec(id))
	}
	rule := &BusyRule{Tokens: ptr(uint64(50)), Ratio: ptr(0.5)}
	all := &BusyRule{Tokens: ptr(uint64(50))}
	probeReq := func(r *BusyRule, general bool) *SelectRequest {
		req := selReq("", toks(9000, 8))
		req.Busy = r
		if general {
			req.RoutingConstraints = &RoutingConstraints{} // not fast-eligible
		}
		return req
	}
	pinned := func(r *BusyRule, w uint64) *SelectRequest {
		req := probeReq(r, false)
		req.PinnedWorker = &PinnedWorker{WorkerID: ptr(w), DPRank: ptr(uint32(0))}
		return req
	}
	for busy := 0; busy <= 4; busy++ {
		if busy > 0 { // make worker `busy` busy: 60 > 50 prefill tokens
			_, err := e.Reserve(&ReservationRequest{SelectionID: ptr(fmt.Sprint("b", busy)), WorkerID: ptr(uint64(busy)),
				Prompt: Prompt{SequenceHashes: []int64{}, ISLTokens: ptr(uint64(60))}, EffectivePrefillTokens: ptr(uint64(60))}, t0)
			noErr(t, err)
		}
		for _, tc := range []struct {
			r    *BusyRule
			want bool // pool busy
		}{{rule, busy >= 2}, {all, busy == 4}} {
			pr, err := e.ProbeQueue(probeReq(tc.r, false))
			noErr(t, err)
			if pr.Busy != tc.want {
				t.Fatalf("%d busy, ratio %v: probe busy %v, want %v", busy, tc.r.Ratio != nil, pr.Busy, tc.want)
			}
			// A pinned request looks at its rank only: worker 1 is busy from the first round on.
			pr, err = e.ProbeQueue(pinned(tc.r, 1))
			noErr(t, err)
			_, selErr := e.Select(pinned(tc.r, 1), t0)
			if pr.Busy != (busy >= 1) || errors.Is(selErr, ErrOverloaded) != (busy >= 1) {
				t.Fatalf("%d busy: pinned to worker 1: probe %v, select %v", busy, pr.Busy, selErr)
			}
			for _, general := range []bool{false, true} {
				_, err := e.Select(probeReq(tc.r, general), t0)
				if refused := errors.Is(err, ErrOverloaded); refused != tc.want || (err != nil && !refused) {
					t.Fatalf("%d busy, ratio %v, general path %v: %v, want refused %v", busy, tc.r.Ratio != nil, general, err, tc.want)
				}
			}
		}
	}
}
