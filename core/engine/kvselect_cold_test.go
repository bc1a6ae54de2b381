package engine

import (
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// coldFleet is a capacityFleet (kvselect_pressure_test.go) on a kvselect engine with
// cold_cache_share share (the pressure and decode terms and speed learning off, to isolate the
// eviction term) that fills worker 1's cache with 16 blocks and worker 2's with 12 through KV
// events, then books and finishes work of new tokens pinned to the workers in hot (each booking
// stores blocks there, and leaves no load behind).
func coldFleet(t *testing.T, share float64, hot ...uint64) *Engine {
	t.Helper()
	cfg := KVSelectDefaults()
	cfg.ColdCacheShare, cfg.KVPressureWeight, cfg.DecodeContextWeight = share, 0, 0
	cfg.FixedPrefillModel = true // completions at booking time would teach absurd speeds
	e := capacityFleet(t, &cfg)
	store(t, e, kvwire.Owner{Worker: 1}, toks(1, 64))
	store(t, e, kvwire.Owner{Worker: 2}, toks(1000, 48))
	for i, w := range hot {
		id := fmt.Sprintf("warm-%d", i)
		pinned(t, e, id, w, toks(5000+100*i, 40), t0)
		noErr(t, e.PrefillCompleteAt(id, t0))
		noErr(t, e.Free(id))
	}
	return e
}

// TestColdCacheTakesTheMiss: a miss goes where it evicts least. By occupancy alone that is
// worker 2 (12 of the fullest rank's 16 blocks). When no request has used worker 1's cache since
// it filled (all the work went to worker 2), its cache is cold and the discount makes it the
// cheaper place to store new blocks; when both took work alike, or the discount is off, nothing
// changes.
func TestColdCacheTakesTheMiss(t *testing.T) {
	miss := toks(90_000, 32)
	for _, c := range []struct {
		name   string
		share  float64
		hot    []uint64
		worker uint64
	}{
		{"discount off, worker 1 cold", 0, []uint64{2, 2}, 2},
		{"worker 1 cold", 0.5, []uint64{2, 2}, 1},
		{"both warm alike", 0.5, []uint64{1, 2}, 2},
		{"no uncached work yet", 0.5, nil, 2},
	} {
		e := coldFleet(t, c.share, c.hot...)
		r, err := e.Select(selReq("", miss), t0)
		noErr(t, err)
		if r.WorkerID != c.worker {
			t.Errorf("%s: worker %d, want %d", c.name, r.WorkerID, c.worker)
		}
	}
}

// TestColdCacheReadIsInUse: a rank whose cache requests read (hits on what it holds) is in use
// even though it stores nothing new, and keeps the full eviction term.
func TestColdCacheReadIsInUse(t *testing.T) {
	e := coldFleet(t, 0.5, 2, 2)
	r, err := e.SelectAndReserve(selReq("hit", toks(1, 64)), t0)
	noErr(t, err)
	if r.WorkerID != 1 {
		t.Fatalf("the hit went to worker %d, not to the cache that holds it", r.WorkerID)
	}
	noErr(t, e.PrefillCompleteAt("hit", t0))
	noErr(t, e.Free("hit"))
	r, err = e.Select(selReq("", toks(90_000, 32)), t0)
	noErr(t, err)
	if r.WorkerID != 2 {
		t.Errorf("worker %d: worker 1 serves hits on its cache, the miss should not evict it", r.WorkerID)
	}
}

// TestColdCacheNeedsCapacity: with a worker whose total_kv_blocks is unknown the partition's
// capacity, and so the heat window, is unknown, and the discount is off.
func TestColdCacheNeedsCapacity(t *testing.T) {
	e := coldFleet(t, 0.5, 2, 2)
	p := e.parts[defKey]
	if p.tracker.HeatWindow() != 40*4 {
		t.Fatalf("heat window %v, want 2 × 20 blocks × 4 tokens", p.tracker.HeatWindow())
	}
	mustUpsert(t, e, spec(3))
	if p.tracker.HeatWindow() != 0 {
		t.Fatalf("heat window %v with a worker of unknown capacity", p.tracker.HeatWindow())
	}
	r, err := e.Select(selReq("", toks(90_000, 32)), t0)
	noErr(t, err)
	if r.WorkerID == 1 {
		t.Errorf("worker 1 chosen with the discount off: its cache is the fullest")
	}
	if _, err := e.DeleteWorker(3); err != nil {
		t.Fatal(err)
	}
	if p.tracker.HeatWindow() != 40*4 {
		t.Fatalf("heat window %v after the unknown worker left", p.tracker.HeatWindow())
	}
}

// TestColdFactor checks the discount's arithmetic: heat over cold_cache_share × the mean heat,
// capped at 1; 1 with no reference.
func TestColdFactor(t *testing.T) {
	k := kvselectTerms{w: weights{coldShare: 0.5}}
	for _, h := range []float64{0, 10, 30} {
		k.observeHeat(h)
	}
	k.settleHeat(3) // mean 40/3, reference 20/3
	for _, c := range []struct{ h, want float64 }{{0, 0}, {10, 1}, {30, 1}, {10.0 / 3, 0.5}} {
		if got := k.coldFactor(c.h); got != c.want {
			t.Errorf("coldFactor(%v) = %v, want %v", c.h, got, c.want)
		}
	}
	k.w.coldShare = 0
	k.settleHeat(3)
	if got := k.coldFactor(0); got != 1 {
		t.Errorf("share 0: coldFactor(0) = %v, want 1", got)
	}
}
