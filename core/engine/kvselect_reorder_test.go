package engine

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestReorderedMissMS: on a reordering partition a miss's externality is its work times the
// rank's pending prefills (or the saturation, whichever is more), uncapped, bounded by the
// slowdown times its own time to first token there (queue + own).
func TestReorderedMissMS(t *testing.T) {
	k := kvselectTerms{w: weights{missWork: 4, reorderSlowdown: 1}, sat: 0.5}
	cases := []struct {
		pending            int
		queue, own, want   float64
		slowdown, saturate float64
	}{
		{pending: 10, queue: 2000, own: 100, want: 1000, slowdown: 1, saturate: 0.5}, // 10 pending, not capped at 4
		{pending: 10, queue: 50, own: 100, want: 150, slowdown: 1, saturate: 0.5},    // bounded by its own 150 ms
		{pending: 10, queue: 50, own: 100, want: 75, slowdown: 0.5, saturate: 0.5},   // half of it
		{pending: 0, queue: 0, own: 100, want: 50, slowdown: 1, saturate: 0.5},       // an idle rank: the saturation
		{pending: 0, queue: 0, own: 100, want: 0, slowdown: 1, saturate: 0},          // an idle fleet
		{pending: 3, queue: 1e6, own: 100, want: 300, slowdown: 1, saturate: 1},      // pending over saturation
		{pending: 40, queue: 1e6, own: 100, want: 4000, slowdown: 1, saturate: 0},    // far past the old cap
	}
	for _, c := range cases {
		k.w.reorderSlowdown, k.sat = c.slowdown, c.saturate
		if got := k.reorderedMissMS(c.pending, c.queue, c.own); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("pending %d queue %v own %v slowdown %v sat %v: %v, want %v", c.pending, c.queue, c.own, c.slowdown, c.saturate, got, c.want)
		}
	}
}

// reorderFleet is a twoRankFleet on a kvselect engine with reordered_miss_slowdown slowdown and
// the prior speed held (fixed, no context share) and every term but the queue and the miss's
// work off, where worker 1 first completes 40 pairs of prefills younger first, by a second
// (teach: the partition learns its engines reorder; without it, in arrival order), then holds
// 10 pending 16-token prefills and worker 2 one pending 20,000-token prefill.
func reorderFleet(t *testing.T, slowdown float64, teach bool) (*Engine, time.Time) {
	t.Helper()
	cfg := KVSelectDefaults()
	cfg.ReorderedMissSlowdown, cfg.FixedPrefillModel, cfg.LearnContextCost = slowdown, true, false
	cfg.EvictionWeight, cfg.CacheStickShare, cfg.DecodeContextWeight, cfg.ActiveRequestTokens = 0, 0, 0, 0
	cfg.KVPressureWeight, cfg.KVOccupancyWeight = 0, 0
	e := twoRankFleet(t, &cfg, func(*WorkerSpec) {})
	now := teachOrder(t, e, teach)
	for i := range 10 {
		pinned(t, e, fmt.Sprintf("hit-%d", i), 1, toks(3_000_000+100*i, 16), now)
	}
	pinned(t, e, "long", 2, toks(4_000_000, 20_000), now)
	return e, now
}

// teachOrder has worker 1 of e complete 40 pairs of 16-token prefills booked 10 ms apart, the
// younger first by a second when reorder (the partition learns its engines reorder) and in
// arrival order otherwise, each pair freed after; it returns the time after the last.
func teachOrder(t *testing.T, e *Engine, reorder bool) time.Time {
	t.Helper()
	now := t0
	for i := range 40 {
		older, younger := fmt.Sprintf("old-%d", i), fmt.Sprintf("young-%d", i)
		pinned(t, e, older, 1, toks(1_000_000+100*i, 16), now)
		pinned(t, e, younger, 1, toks(2_000_000+100*i, 16), now.Add(10*time.Millisecond))
		first, second := younger, older
		if !reorder {
			first, second = older, younger
		}
		noErr(t, e.PrefillCompleteAt(first, now.Add(time.Second)))
		noErr(t, e.PrefillCompleteAt(second, now.Add(2*time.Second)))
		noErr(t, e.Free(older))
		noErr(t, e.Free(younger))
		now = now.Add(3 * time.Second)
	}
	return now
}

// TestReorderedPricingFollowsTheLearnedOrder: a fresh 16,384-token prompt (about 378 ms of
// prefill at the prior) on worker 1 (10 pending prefills, ~167 ms queued) or worker 2 (one,
// ~488 ms). Priced for arrival order, worker 1's ten pending prefills count four times the
// miss's work (the cap): 167 + 5·378 ≈ 2,057 ms against 488 + 2·378 ≈ 1,244 ms, so worker 2.
// On a partition learned to reorder (40 overtaken completions), the work counts ten times but
// at most the miss's own time to first token: 167 + 378 + 545 ≈ 1,090 ms, so worker 1. The
// same fleet in arrival order, or with the rule off, stays on worker 2; the partition's stats
// report what it learned.
func TestReorderedPricingFollowsTheLearnedOrder(t *testing.T) {
	prompt := toks(5_000_000, 16_384)
	for _, c := range []struct {
		name     string
		slowdown float64
		teach    bool
		want     uint64
	}{
		{"reordering engines", 1, true, 1},
		{"arrival order", 1, false, 2},
		{"rule off", 0, true, 2},
	} {
		e, now := reorderFleet(t, c.slowdown, c.teach)
		resp, err := e.Select(selReq("", prompt), now)
		noErr(t, err)
		st := e.PartitionStats()[0].QueueOrder
		t.Logf("%s: worker %d, overtaken share %.2f over %d samples, reordered %v", c.name, resp.WorkerID, st.OvertakenShare, st.Samples, st.Reordered)
		if resp.WorkerID != c.want {
			t.Errorf("%s: worker %d, want %d", c.name, resp.WorkerID, c.want)
		}
		if st.Samples < 40 || st.Reordered != c.teach || (st.OvertakenShare == 1) != c.teach {
			t.Errorf("%s: stats %+v", c.name, st)
		}
	}
}
