package engine

import (
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// predictedEngine is an engine with router_predicted_ttl_secs = ttl (nil: unset) and two
// single-rank workers, 1 and 2 (block size 4).
func predictedEngine(t *testing.T, ttl *time.Duration) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	cfg.PredictedTTL = ttl
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1))
	mustUpsert(t, e, spec(2))
	return e
}

// pinned books prompt on worker w as id at time at and returns the answer.
func pinned(t *testing.T, e *Engine, id string, w uint64, prompt []uint32, at time.Time) *SelectResponse {
	t.Helper()
	resp, err := e.SelectAndReserve(&SelectRequest{SelectionID: ptr(id), Prompt: tokenPrompt(prompt),
		PinnedWorker: &PinnedWorker{WorkerID: ptr(w), DPRank: ptr(uint32(0))}}, at)
	noErr(t, err)
	return resp
}

// bookedAndFreed books prompt on worker w as id at time at, then frees the booking: only a
// prediction can remain.
func bookedAndFreed(t *testing.T, e *Engine, id string, w uint64, prompt []uint32, at time.Time) {
	t.Helper()
	pinned(t, e, id, w, prompt, at)
	noErr(t, e.Free(id))
}

// TestPredictedTTL: with router_predicted_ttl_secs and KV events on, a booking's blocks count
// as cached on its rank until the TTL (also after the booking is freed), merged with the event
// index by per-rank maximum; query-only selections and hash-only bookings record nothing;
// entries expire via Sweep and go with their worker.
func TestPredictedTTL(t *testing.T) {
	e := predictedEngine(t, ptr(10*time.Second))
	prompt := toks(0, 16) // 4 blocks
	overlap := func(want1, want2 uint64) {
		t.Helper()
		ov := deviceOverlap(t, e, prompt)
		if ov[kvwire.Owner{Worker: 1}] != want1 || ov[kvwire.Owner{Worker: 2}] != want2 {
			t.Fatalf("device overlap %v, want worker 1: %d, worker 2: %d", ov, want1, want2)
		}
	}

	// A query-only selection records nothing.
	_, err := e.Select(&SelectRequest{Prompt: tokenPrompt(prompt), AllowedWorkerIDs: []uint64{2}}, t0)
	noErr(t, err)
	overlap(0, 0)
	// A booking does, and outlives its free.
	bookedAndFreed(t, e, "a", 2, prompt, t0)
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
	o1, o2 := kvwire.Owner{Worker: 1}, kvwire.Owner{Worker: 2}
	e.ApplyKVEvents(o1, []KVEvent{storedEvent(o1, TierOf("device"), nil, prompt[:8], 4)})
	e.ApplyKVEvents(o2, []KVEvent{storedEvent(o2, TierOf("device"), nil, prompt[:8], 4)})
	overlap(2, 4)

	// The prediction expires at its deadline; the events' blocks remain.
	e.Sweep(t0.Add(10*time.Second - 1))
	overlap(2, 4)
	e.Sweep(t0.Add(10 * time.Second))
	overlap(2, 2)

	// A worker that leaves takes its predictions with it.
	pinned(t, e, "b", 1, prompt, t0.Add(20*time.Second))
	overlap(4, 2)
	_, _ = e.DeleteWorker(1)
	mustUpsert(t, e, spec(1))
	overlap(0, 2)
	e.Sweep(t0.Add(time.Hour)) // must not trip over the dropped owner's queued expiries
	overlap(0, 2)
}

// TestPredictedTTLOffRecordsNothing: without the setting a freed booking leaves no trace.
func TestPredictedTTLOffRecordsNothing(t *testing.T) {
	e := predictedEngine(t, nil)
	prompt := toks(0, 16)
	bookedAndFreed(t, e, "a", 2, prompt, t0)
	if ov := deviceOverlap(t, e, prompt); ov[kvwire.Owner{Worker: 2}] != 0 {
		t.Fatalf("a booking was indexed without router_predicted_ttl_secs: %v", ov)
	}
}

func TestAbsorb(t *testing.T) {
	for _, tc := range []struct {
		in   radix.Counts
		dev  int32
		want radix.Counts
	}{
		{radix.Counts{2, 2, 1, 1}, 1, radix.Counts{2, 2, 1, 1}}, // shorter prediction: unchanged
		{radix.Counts{2, 2, 1, 1}, 3, radix.Counts{3, 1, 1, 1}}, // eats into the host extension
		{radix.Counts{2, 2, 1, 1}, 5, radix.Counts{5, 0, 0, 1}}, // host, then disk
		{radix.Counts{2, 2, 1, 1}, 9, radix.Counts{9, 0, 0, 0}}, // beyond every tier
		{radix.Counts{0, 0, 0, 3}, 2, radix.Counts{2, 0, 0, 1}}, // external only
	} {
		got := tc.in
		absorb(&got, tc.dev)
		if got != tc.want {
			t.Errorf("absorb(%v, %d) = %v, want %v", tc.in, tc.dev, got, tc.want)
		}
		// Cumulative coverage is the larger of the two prefixes: nothing counted twice.
		sum := func(c radix.Counts) int32 { return c[0] + c[1] + c[2] + c[3] }
		if sum(got) != max(sum(tc.in), tc.dev) {
			t.Errorf("absorb(%v, %d) covers %d blocks, want %d", tc.in, tc.dev, sum(got), max(sum(tc.in), tc.dev))
		}
	}
}

// TestPredictedTTLTiers: a prediction over a rank whose prefix is partly in a lower tier makes
// the device prefix longer and the lower-tier extension shorter, on both the selection path and
// overlap_scores: the four blocks are counted once.
func TestPredictedTTLTiers(t *testing.T) {
	e := predictedEngine(t, ptr(10*time.Second))
	prompt := toks(0, 16)
	o1 := kvwire.Owner{Worker: 1}
	e.ApplyKVEvents(o1, []KVEvent{
		storedEvent(o1, TierOf("device"), nil, prompt[:8], 4),
		storedEvent(o1, TierOf("host_pinned"), prompt[:8], prompt[8:], 4),
	})
	row := func() OverlapRow {
		t.Helper()
		res, err := e.OverlapScores(&PromptQuery{Prompt: tokenPrompt(prompt)})
		noErr(t, err)
		for _, r := range res.Workers {
			if r.WorkerID == 1 {
				return r
			}
		}
		t.Fatal("no row for worker 1")
		return OverlapRow{}
	}
	if r := row(); r.DeviceBlocks != 2 || r.HostPinnedExtensionBlocks != 2 {
		t.Fatalf("before the booking: %+v", r)
	}
	bookedAndFreed(t, e, "a", 1, prompt, t0)
	if r := row(); r.DeviceBlocks != 4 || r.HostPinnedExtensionBlocks != 0 || r.HostPinnedBlocks != 4 {
		t.Fatalf("after the booking: %+v, want device 4 and no host extension", r)
	}
	// The selection path sees the same counts (the fast path and the general path share them).
	resp, err := e.Select(&SelectRequest{Prompt: tokenPrompt(prompt)}, t0)
	noErr(t, err)
	if resp.WorkerID != 1 || resp.Overlap.GPU != 16 || resp.Overlap.CPU != 16 {
		t.Fatalf("selected %d with overlap %+v, want worker 1 with 16 device tokens, 16 in all", resp.WorkerID, resp.Overlap)
	}
}

// TestPredictedTTLExpiresAtSelection: a prediction past its TTL no longer counts at the next
// selection, without waiting for a Sweep.
func TestPredictedTTLExpiresAtSelection(t *testing.T) {
	e := predictedEngine(t, ptr(time.Second))
	prompt := toks(0, 16)
	bookedAndFreed(t, e, "a", 2, prompt, t0)
	resp, err := e.Select(&SelectRequest{Prompt: tokenPrompt(prompt)}, t0.Add(time.Second-1))
	noErr(t, err)
	if resp.WorkerID != 2 || resp.Overlap.GPU != 16 {
		t.Fatalf("within the TTL: worker %d overlap %+v, want 2 with 16 device tokens", resp.WorkerID, resp.Overlap)
	}
	resp, err = e.Select(&SelectRequest{Prompt: tokenPrompt(prompt)}, t0.Add(time.Second))
	noErr(t, err)
	if resp.Overlap.GPU != 0 {
		t.Fatalf("after the TTL: worker %d still has overlap %+v", resp.WorkerID, resp.Overlap)
	}
}

// TestPredictedTTLClockStepBack: a booking whose time is earlier than a previous one's (a
// wall clock stepped back) neither shortens an entry nor gets stuck behind a later deadline:
// deadlines are clamped to the latest queued, so the queue stays ordered.
func TestPredictedTTLClockStepBack(t *testing.T) {
	e := predictedEngine(t, ptr(10*time.Second))
	prompt := toks(0, 16)
	bookedAndFreed(t, e, "late", 1, prompt, t0.Add(20*time.Second)) // deadline t0+30s
	bookedAndFreed(t, e, "early", 1, prompt, t0)                    // t0+10s, clamped to t0+30s: not shortened
	bookedAndFreed(t, e, "other", 2, prompt, t0)                    // t0+10s, clamped to t0+30s
	e.Sweep(t0.Add(15 * time.Second))
	if ov := deviceOverlap(t, e, prompt); ov[kvwire.Owner{Worker: 1}] != 4 || ov[kvwire.Owner{Worker: 2}] != 4 {
		t.Fatalf("after the step back: %v", ov)
	}
	e.Sweep(t0.Add(30 * time.Second))
	if ov := deviceOverlap(t, e, prompt); ov[kvwire.Owner{Worker: 1}] != 0 || ov[kvwire.Owner{Worker: 2}] != 0 {
		t.Fatalf("past every deadline: %v", ov)
	}
}

// TestPredictedTTLHintSource: a kv_hint's source is chosen by its event-confirmed prefix (only
// those blocks have engine hashes to fetch), not by a device count raised by predictions.
func TestPredictedTTLHintSource(t *testing.T) {
	cfg := DefaultConfig()
	cfg.PredictedTTL = ptr(10 * time.Second)
	e := newEngine(t, &cfg)
	hinted := func(src string) func(*WorkerSpec) {
		return func(s *WorkerSpec) {
			s.RouterHintWorkerType = ptr("decode")
			if src != "" {
				s.RouterHintSourceControlEndpoints = map[string]string{"0": src}
			}
		}
	}
	mustUpsert(t, e, spec(1, hinted("")))              // target: nothing cached
	mustUpsert(t, e, spec(2, hinted("tcp://w2:5600"))) // 1 block confirmed, 6 predicted
	mustUpsert(t, e, spec(3, hinted("tcp://w3:5600"))) // 3 blocks confirmed
	prompt := toks(0, 24)
	store(t, e, kvwire.Owner{Worker: 2}, prompt[:4])
	store(t, e, kvwire.Owner{Worker: 3}, prompt[:12])
	pinned(t, e, "predict", 2, prompt, t0)
	if ov := deviceOverlap(t, e, prompt); ov[kvwire.Owner{Worker: 2}] != 6 || ov[kvwire.Owner{Worker: 3}] != 3 {
		t.Fatalf("overlap %v, want worker 2: 6 (predicted), worker 3: 3", ov)
	}
	h := pinned(t, e, "target", 1, prompt, t0).KVHint
	if h == nil || h.Actions[0].Payload.SourceControlEndpoint != "tcp://w3:5600" || len(h.Actions[0].Payload.BlockHashes) != 3 {
		t.Fatalf("hint %+v, want worker 3's three confirmed blocks", h)
	}
}
