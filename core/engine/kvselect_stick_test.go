package engine

import (
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// stickFleet registers workers 1–3 (block size 4, total_kv_blocks 1,000) on a kvselect engine
// at cache_stick_share share, caches the first cached tokens of want on worker 1 and gives every
// worker pending prefill work: 40,000 tokens on worker 1 (a long queue), one block on 2 and 3.
// Priced alone, want is far cheaper on 2 or 3 than behind worker 1's queue.
func stickFleet(t *testing.T, share float64, want []uint32, cached int) *Engine {
	t.Helper()
	cfg := KVSelectDefaults()
	cfg.CacheStickShare = share
	cfg.FixedPrefillModel = true // no completions teach speeds here
	e := newEngine(t, &cfg)
	for id := uint64(1); id <= 3; id++ {
		mustUpsert(t, e, spec(id, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(1000)) }))
	}
	store(t, e, kvwire.Owner{Worker: 1}, want[:cached])
	pinned(t, e, "queue-1", 1, toks(10_000, 40_000), t0)
	pinned(t, e, "queue-2", 2, toks(60_000, 4), t0)
	pinned(t, e, "queue-3", 3, toks(70_000, 4), t0)
	return e
}

// TestCacheStickiness checks the rule of kvselect_stick.go on both selection paths: a prompt
// at least half cached on a rank stays among the ranks holding it while every other rank is
// busy, whatever their queues; an idle rank with KV room for it, a share below the threshold,
// the rule off, or an allowed_worker_ids list without the holder give the choice back to the
// cost. The partition's routing quality counts the bookings the rule held for.
func TestCacheStickiness(t *testing.T) {
	want := toks(1, 64) // 16 blocks
	cases := []struct {
		name   string
		share  float64
		cached int                           // tokens of want cached on worker 1
		edit   func(t *testing.T, e *Engine) // before the selection
		allow  []uint64
		stuck  bool // the request goes to worker 1
	}{
		{name: "every other rank busy", share: 0.5, cached: 64, stuck: true},
		{name: "half cached", share: 0.5, cached: 32, stuck: true},
		{name: "rule off", share: 0, cached: 64},
		{name: "below the share", share: 0.5, cached: 28},
		{name: "an idle rank with room", share: 0.5, cached: 64, edit: func(t *testing.T, e *Engine) {
			noErr(t, e.PrefillCompleteAt("queue-3", t0))
		}},
		{name: "an idle rank without room", share: 0.5, cached: 64, stuck: true, edit: func(t *testing.T, e *Engine) {
			noErr(t, e.PrefillCompleteAt("queue-3", t0))
			pinned(t, e, "full-3", 3, toks(80_000, 4*990), t0) // 991 + 16 blocks > 1,000
			noErr(t, e.PrefillCompleteAt("full-3", t0))
		}},
		{name: "holder not allowed", share: 0.5, cached: 64, allow: []uint64{2, 3}},
	}
	for _, c := range cases {
		for _, general := range []bool{false, true} {
			e := stickFleet(t, c.share, want, c.cached)
			e.scratch.fast.disabled = general
			if c.edit != nil {
				c.edit(t, e)
			}
			req := selReq("probe", want)
			req.AllowedWorkerIDs = c.allow
			r, err := e.SelectAndReserve(req, t0)
			noErr(t, err)
			if got := r.WorkerID == 1; got != c.stuck {
				t.Errorf("%s (general path %v): worker %d, want stuck to worker 1: %v", c.name, general, r.WorkerID, c.stuck)
			}
			// The booking counts as sticky exactly when the rule held (here: when it stuck).
			sticky := uint64(0)
			if c.stuck {
				sticky = 1
			}
			if q := e.PartitionStats()[0].Quality; q.StickyBookings != sticky {
				t.Errorf("%s (general path %v): %d sticky bookings, want %d", c.name, general, q.StickyBookings, sticky)
			}
		}
	}
}

// TestStickinessRule checks the rule's arithmetic: the sticky set by share of the prompt's
// blocks (indexed or booked), and what lifts the rule (no pending prefill and room, unknown
// capacity counting as room).
func TestStickinessRule(t *testing.T) {
	n := normalized{isl: 30} // 8 blocks of 4 (the last partial)
	s, ok := newStickiness(0.5, &n, 4)
	if !ok || s.need != 4 || s.blocks != 8 {
		t.Fatalf("newStickiness = %+v, %v; want need 4, blocks 8", s, ok)
	}
	for _, c := range []struct {
		dev    int32
		booked int
		want   bool
	}{{4, 0, true}, {3, 0, false}, {0, 4, true}, {3, 5, true}, {0, 0, false}} {
		if got := s.holds(c.dev, c.booked); got != c.want {
			t.Errorf("holds(%d, %d) = %v, want %v", c.dev, c.booked, got, c.want)
		}
	}
	for _, c := range []struct {
		pending  int
		active   uint64
		booked   int
		capacity uint64
		want     bool
	}{
		{0, 12, 0, 20, true},  // 12 + 8 ≤ 20
		{0, 13, 0, 20, false}, // 21 > 20
		{0, 13, 1, 20, true},  // one of the request's blocks already live there
		{1, 0, 0, 20, false},  // a prefill pending
		{0, 500, 0, 0, true},  // capacity not registered
	} {
		if got := s.frees(c.pending, c.active, c.booked, c.capacity); got != c.want {
			t.Errorf("frees(%d, %d, %d, %d) = %v, want %v", c.pending, c.active, c.booked, c.capacity, got, c.want)
		}
	}
	for _, share := range []float64{0} {
		if _, ok := newStickiness(share, &n, 4); ok {
			t.Errorf("share %v: a rule", share)
		}
	}
	if _, ok := newStickiness(0.5, &normalized{}, 4); ok {
		t.Error("empty prompt: a rule")
	}
}
