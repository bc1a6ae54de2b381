package engine

import (
	"testing"
	"time"
)

// TestPredictedTTL: with router_predicted_ttl_secs and KV events on, a booking's blocks count
// as cached on its rank until the TTL (also after the booking is freed), merged with the event
// index by per-rank maximum; query-only selections and hash-only bookings record nothing;
// entries expire via Sweep and go with their worker.
func TestPredictedTTL(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PredictedTTL = ptr(10 * time.Second)
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1))
	mustUpsert(t, e, spec(2))
	prompt := toks(0, 16) // 4 blocks
	overlap := func(want1, want2 uint64) {
		t.Helper()
		ov := deviceOverlap(t, e, prompt)
		if ov[Owner{Worker: 1}] != want1 || ov[Owner{Worker: 2}] != want2 {
			t.Fatalf("device overlap %v, want worker 1: %d, worker 2: %d", ov, want1, want2)
		}
	}

	// A query-only selection records nothing.
	_, err := e.Select(&SelectRequest{Prompt: tokenPrompt(prompt), AllowedWorkerIDs: []uint64{2}}, t0)
	noErr(t, err)
	overlap(0, 0)
	// A booking does, and outlives its free.
	_, err = e.SelectAndReserve(&SelectRequest{SelectionID: ptr("a"), Prompt: tokenPrompt(prompt),
		PinnedWorker: &PinnedWorker{WorkerID: ptr(uint64(2)), DPRank: ptr(uint32(0))}}, t0)
	noErr(t, err)
	noErr(t, e.Free("a"))
	overlap(0, 4)
	// Selections see it: worker 2 has the prefix, loads are equal.
	for range 8 {
		resp, err := e.Select(&SelectRequest{Prompt: tokenPrompt(prompt)}, t0)
		noErr(t, err)
		if resp.WorkerID != 2 {
			t.Fatalf("selected worker %d, want 2 (predicted prefix)", resp.WorkerID)
		}
	}
	// A hash-only booking records nothing.
	_, err = e.Reserve(&ReservationRequest{SelectionID: ptr("h"), WorkerID: ptr(uint64(1)),
		Prompt: Prompt{SequenceHashes: []int64{1, 2}, ISLTokens: ptr(uint64(8))}}, t0)
	noErr(t, err)
	overlap(0, 4)

	// Events stay authoritative on their own; the merge takes the larger device count per rank.
	o1, o2 := Owner{Worker: 1}, Owner{Worker: 2}
	e.ApplyKVEvents(o1, []KVEvent{storedEvent(o1, TierOf("device"), nil, prompt[:8], 4)})
	e.ApplyKVEvents(o2, []KVEvent{storedEvent(o2, TierOf("device"), nil, prompt[:8], 4)})
	overlap(2, 4)

	// The prediction expires at its deadline; the events' blocks remain.
	e.Sweep(t0.Add(10*time.Second - 1))
	overlap(2, 4)
	e.Sweep(t0.Add(10 * time.Second))
	overlap(2, 2)

	// A worker that leaves takes its predictions with it.
	_, err = e.SelectAndReserve(&SelectRequest{SelectionID: ptr("b"), Prompt: tokenPrompt(prompt),
		PinnedWorker: &PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(0))}}, t0.Add(20*time.Second))
	noErr(t, err)
	overlap(4, 2)
	_, _ = e.DeleteWorker(1)
	mustUpsert(t, e, spec(1))
	overlap(0, 2)
	e.Sweep(t0.Add(time.Hour)) // must not trip over the dropped owner's queued expiries
	overlap(0, 2)
}

// TestPredictedTTLOffRecordsNothing: without the setting a freed booking leaves no trace.
func TestPredictedTTLOffRecordsNothing(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1))
	mustUpsert(t, e, spec(2))
	prompt := toks(0, 16)
	_, err := e.SelectAndReserve(&SelectRequest{SelectionID: ptr("a"), Prompt: tokenPrompt(prompt),
		PinnedWorker: &PinnedWorker{WorkerID: ptr(uint64(2)), DPRank: ptr(uint32(0))}}, t0)
	noErr(t, err)
	noErr(t, e.Free("a"))
	if ov := deviceOverlap(t, e, prompt); ov[Owner{Worker: 2}] != 0 {
		t.Fatalf("a booking was indexed without router_predicted_ttl_secs: %v", ov)
	}
}
