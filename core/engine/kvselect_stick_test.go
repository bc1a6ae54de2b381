package engine

import (
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// stickFleet registers workers 1–3 (block size 4, total_kv_blocks 20,000) on a kvselect engine
// at cache_stick_share share, caches the first cached tokens of want on worker 1 and gives every
// worker pending prefill work: 40,000 tokens on worker 1, other tokens on 2 and 3. At the prior
// model (fixed), 32,000 tokens queue about 0.72 times as long as 40,000: priced alone, want is
// cheaper on 2 or 3, but not by the factor (1.5) that moves a sticky prompt between busy ranks.
func stickFleet(t *testing.T, share float64, want []uint32, cached, other int) *Engine {
	t.Helper()
	cfg := KVSelectDefaults()
	cfg.CacheStickShare = share
	cfg.FixedPrefillModel = true // no completions teach speeds here
	e := newEngine(t, &cfg)
	for id := uint64(1); id <= 3; id++ {
		mustUpsert(t, e, spec(id, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(20_000)) }))
	}
	store(t, e, kvwire.Owner{Worker: 1}, want[:cached])
	pinned(t, e, "queue-1", 1, toks(100_000, 40_000), t0)
	pinned(t, e, "queue-2", 2, toks(200_000, other), t0)
	pinned(t, e, "queue-3", 3, toks(300_000, other), t0)
	return e
}

// TestCacheStickiness checks the rule of kvselect_stick.go on both selection paths: a prompt
// at least half cached on a rank stays among the ranks holding it while the others are busy and
// not much cheaper; a rank outside with KV room takes it when idle or at a cost below two thirds
// of the sticky rank's, and a share below the threshold, the rule off, or an allowed_worker_ids
// list without the holder give the choice back to the cost. The partition's routing quality
// counts the bookings the rule kept from some rank.
func TestCacheStickiness(t *testing.T) {
	want := toks(1, 64) // 16 blocks
	const near = 32_000 // queues 0.72 times worker 1's
	cases := []struct {
		name   string
		share  float64
		cached int // tokens of want cached on worker 1
		other  int // tokens pending on workers 2 and 3
		edit   func(t *testing.T, e *Engine)
		allow  []uint64
		stuck  bool // the request goes to worker 1
		kept   bool // the rule kept some eligible rank from it (besides stuck)
	}{
		{name: "others busy, not much cheaper", share: 0.5, cached: 64, other: near, stuck: true},
		{name: "half cached", share: 0.5, cached: 32, other: near, stuck: true},
		{name: "rule off", share: 0, cached: 64, other: near},
		{name: "below the share", share: 0.5, cached: 28, other: near},
		{name: "a busy rank much cheaper, with room", share: 0.5, cached: 64, other: 4},
		{name: "a busy rank much cheaper, without room", share: 0.5, cached: 64, other: 4, stuck: true, edit: func(t *testing.T, e *Engine) {
			for _, w := range []uint64{2, 3} {
				id := fmt.Sprint("full-", w)
				pinned(t, e, id, w, toks(int(w)*1_000_000, 4*19_990), t0) // 1 + 19,990 + 16 blocks > 20,000
				noErr(t, e.PrefillCompleteAt(id, t0))
			}
		}},
		{name: "an idle rank with room", share: 0.5, cached: 64, other: near, kept: true, edit: func(t *testing.T, e *Engine) {
			noErr(t, e.PrefillCompleteAt("queue-3", t0))
		}},
		{name: "an idle rank without room", share: 0.5, cached: 64, other: near, stuck: true, edit: func(t *testing.T, e *Engine) {
			noErr(t, e.PrefillCompleteAt("queue-3", t0))
			pinned(t, e, "full-3", 3, toks(400_000, 4*12_000), t0) // 8,000 + 12,000 + 16 blocks > 20,000
			noErr(t, e.PrefillCompleteAt("full-3", t0))
		}},
		{name: "holder not allowed", share: 0.5, cached: 64, other: near, allow: []uint64{2, 3}},
	}
	for _, c := range cases {
		for _, general := range []bool{false, true} {
			e := stickFleet(t, c.share, want, c.cached, c.other)
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
			// The booking counts as sticky when the rule kept a rank from it: worker 2, busy
			// and not much cheaper, beside the idle worker 3 that took it.
			sticky := uint64(0)
			if c.stuck || c.kept {
				sticky = 1
			}
			if q := e.PartitionStats()[0].Quality; q.StickyBookings != sticky {
				t.Errorf("%s (general path %v): %d sticky bookings, want %d", c.name, general, q.StickyBookings, sticky)
			}
		}
	}
}

// TestStickinessRule checks the rule's arithmetic: the sticky set by share of the prompt's
// blocks (indexed or booked), room (unknown capacity counting as room), and which rank outside
// the set may take the request (room, and idle or 1.5 times cheaper than the best in it).
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
		active   uint64
		booked   int
		capacity uint64
		want     bool
	}{
		{12, 0, 20, true},  // 12 + 8 ≤ 20
		{13, 0, 20, false}, // 21 > 20
		{13, 1, 20, true},  // one of the request's blocks already live there
		{500, 0, 0, true},  // capacity not registered
	} {
		if got := s.room(c.active, c.booked, c.capacity); got != c.want {
			t.Errorf("room(%d, %d, %d) = %v, want %v", c.active, c.booked, c.capacity, got, c.want)
		}
	}
	for _, c := range []struct {
		cost, best float64
		pending    int
		active     uint64
		want       bool
	}{
		{90, 100, 0, 0, true},   // idle, with room
		{90, 100, 2, 0, false},  // busy, not 1.5 times cheaper
		{66, 100, 2, 0, true},   // busy, 66 × 1.5 < 100
		{66, 100, 2, 13, false}, // no room
		{0, 0, 2, 0, false},     // a non-positive best admits no busy rank
	} {
		if got := s.takes(c.cost, c.best, c.pending, c.active, 0, 20); got != c.want {
			t.Errorf("takes(%v, %v, %d, %d) = %v, want %v", c.cost, c.best, c.pending, c.active, got, c.want)
		}
	}
	if _, ok := newStickiness(0, &n, 4); ok {
		t.Error("share 0: a rule")
	}
	if _, ok := newStickiness(0.5, &normalized{}, 4); ok {
		t.Error("empty prompt: a rule")
	}
}
