package engine

import (
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// fillFleet registers workers 1 and 2 (block size 4) with total_kv_blocks cap1 and cap2 on a
// kvselect engine whose only term besides the request's own prefill is the eviction term, and
// caches 16 blocks on worker 1 and 24 on worker 2 through KV events.
func fillFleet(t *testing.T, cap1, cap2 uint64) *Engine {
	t.Helper()
	cfg := KVSelectDefaults()
	cfg.KVPressureWeight, cfg.KVOccupancyWeight, cfg.DecodeContextWeight, cfg.ActiveRequestTokens = 0, 0, 0, 0
	cfg.ColdCacheShare, cfg.CacheStickShare = 0, 0
	cfg.FixedPrefillModel = true
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(cap1) }))
	mustUpsert(t, e, spec(2, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(cap2) }))
	store(t, e, kvwire.Owner{Worker: 1}, toks(1, 64))
	store(t, e, kvwire.Owner{Worker: 2}, toks(1000, 96))
	return e
}

// TestEvictionOccupancyPerCapacity: the eviction term's occupancy is measured against each
// rank's registered cache, not in raw blocks. Worker 1 holds 16 blocks of a 16-block cache,
// worker 2 24 of 40: a miss evicts on worker 1 and not on worker 2, so it goes to worker 2,
// though worker 2 holds more blocks. With equal capacities the raw counts decide as before
// (worker 1, fewer blocks). A registration that changes the smallest cache rescales every rank:
// worker 1 re-registered at 64 blocks makes 40 the smallest and worker 1 (16 of 64) the emptier;
// back at 16, worker 2 is again.
func TestEvictionOccupancyPerCapacity(t *testing.T) {
	miss := toks(90_000, 32)
	pick := func(e *Engine) uint64 {
		t.Helper()
		r, err := e.Select(selReq("", miss), t0)
		noErr(t, err)
		return r.WorkerID
	}
	e := fillFleet(t, 16, 40)
	if w := pick(e); w != 2 {
		t.Errorf("16 of 16 blocks against 24 of 40: worker %d, want 2 (the emptier cache)", w)
	}
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(64)) }))
	if w := pick(e); w != 1 {
		t.Errorf("worker 1 re-registered at 64 blocks (16 held), worker 2 at 40 (24 held): worker %d, want 1", w)
	}
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(16)) }))
	if w := pick(e); w != 2 {
		t.Errorf("worker 1 back at 16 blocks: worker %d, want 2", w)
	}
	if w := pick(fillFleet(t, 40, 40)); w != 1 {
		t.Errorf("equal capacities, 16 against 24 blocks: worker %d, want 1", w)
	}
}
