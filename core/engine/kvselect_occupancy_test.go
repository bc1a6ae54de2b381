package engine

import (
	"math"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestOccupancyMS: the term is weight · u² · capacity · block_size · B for a request of at least
// the gate's share of the capacity, u the occupancy it leaves (active + its blocks − those
// already booked there, over the capacity), and 0 below the gate, at weight 0 and on a rank of
// unknown capacity.
func TestOccupancyMS(t *testing.T) {
	k := kvselectTerms{w: weights{occupancy: 2, occupancyShare: 0.3}, bs: 4, isl: 32, islBlocks: 8}
	const invCap = 1.0 / 20
	// 10 active + 8 new − 2 booked = 16 of 20 blocks: u = 0.8.
	if got, want := k.occupancyMS(10, 2, invCap, 0.5), 2*0.8*0.8*20*4*0.5; math.Abs(got-want) > 1e-9 {
		t.Errorf("occupancyMS = %v, want %v", got, want)
	}
	if got := k.occupancyMS(10, 2, 0, 0.5); got != 0 {
		t.Errorf("unknown capacity: %v, want 0", got)
	}
	if got := k.occupancyMS(10, 2, 1.0/40, 0.5); got != 0 { // 8 of 40 blocks: below the 0.3 gate
		t.Errorf("request below the gate: %v, want 0", got)
	}
	k.w.occupancyShare = 0
	if got, want := k.occupancyMS(10, 2, 1.0/40, 0.5), 2*0.4*0.4*40*4*0.5; math.Abs(got-want) > 1e-9 {
		t.Errorf("ungated: %v, want %v", got, want)
	}
	k.w.occupancy = 0
	if got := k.occupancyMS(10, 2, invCap, 0.5); got != 0 {
		t.Errorf("weight 0: %v, want 0", got)
	}
}

// occupancyFleet is a capacityFleet (20 blocks per rank, block size 4) on a kvselect engine with
// kv_occupancy_weight w and kv_occupancy_min_share share, every other term that tells the ranks
// apart off (eviction, stickiness, decode, live requests), where worker 1 caches a 4-block
// prefix and runs an 8-block context that starts with it; worker 2 is empty. Both have room.
func occupancyFleet(t *testing.T, w, share float64, prefix []uint32) *Engine {
	t.Helper()
	cfg := KVSelectDefaults()
	cfg.KVOccupancyWeight, cfg.KVOccupancyMinShare = w, share
	cfg.EvictionWeight, cfg.CacheStickShare, cfg.DecodeContextWeight, cfg.ActiveRequestTokens = 0, 0, 0, 0
	e := capacityFleet(t, &cfg)
	store(t, e, kvwire.Owner{Worker: 1}, prefix)
	runningOn(t, e, "long-context", 1, cat(prefix, toks(90_000, 16)))
	return e
}

// TestOccupancySpreadsLongRequests: a 12-block request (0.6 of a rank's cache) sharing the
// 4-block prefix goes to worker 1, which caches it, with the term off; with it on, the 16 of 20
// blocks it would leave pinned there cost more than the prefix saves, and it goes to the empty
// worker. A 5-block request (0.25 of the cache, below the 0.3 gate) stays on the prefix at the
// default; ungated, the term moves it too.
func TestOccupancySpreadsLongRequests(t *testing.T) {
	prefix := toks(1, 16)
	long, short := cat(prefix, toks(50_000, 32)), cat(prefix, toks(60_000, 4))
	def := KVSelectDefaults()
	for _, c := range []struct {
		name     string
		w, share float64
		prompt   []uint32
		worker   uint64
	}{
		{"long, term off", 0, def.KVOccupancyMinShare, long, 1},
		{"long, default", def.KVOccupancyWeight, def.KVOccupancyMinShare, long, 2},
		{"short, default", def.KVOccupancyWeight, def.KVOccupancyMinShare, short, 1},
		{"short, ungated", def.KVOccupancyWeight, 0, short, 2},
	} {
		e := occupancyFleet(t, c.w, c.share, prefix)
		r, err := e.Select(selReq("", c.prompt), t0)
		noErr(t, err)
		if r.WorkerID != c.worker {
			t.Errorf("%s: worker %d, want %d", c.name, r.WorkerID, c.worker)
		}
	}
}

// TestOccupancyPrefersTheLargerCache: two empty ranks of 20 and 80 blocks. An 8-block request
// is 0.4 of the small rank's cache and 0.1 of the large one's: with the term on every such
// request goes to the large rank (only the small one prices it); with the term off the ranks
// tie and the engine draws between them.
func TestOccupancyPrefersTheLargerCache(t *testing.T) {
	for _, w := range []float64{0, KVSelectDefaults().KVOccupancyWeight} {
		cfg := KVSelectDefaults()
		cfg.KVOccupancyWeight = w
		e := twoRankFleet(t, &cfg, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(20 * *s.WorkerID * *s.WorkerID)) })
		onLarge := 0
		for i := range 20 {
			r, err := e.Select(selReq("", toks(1000*i, 32)), t0)
			noErr(t, err)
			if r.WorkerID == 2 {
				onLarge++
			}
		}
		if w > 0 && onLarge != 20 {
			t.Errorf("kv_occupancy_weight %v: %d of 20 on the larger cache, want 20", w, onLarge)
		} else if w == 0 && (onLarge == 0 || onLarge == 20) {
			t.Errorf("term off: %d of 20 on the larger cache, want a draw between tied ranks", onLarge)
		}
	}
}
