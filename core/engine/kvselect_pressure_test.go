package engine

import (
	"testing"
)

// pressureFleet registers workers 1 and 2 (block size 4, total_kv_blocks 20) on a kvselect engine
// with kv_pressure_weight w, caches 4 blocks of want's prompt on worker 1, and books there a
// running (prefill complete) request of 19 other blocks: worker 1 holds the prefix but has room
// for 1 more pinned block, worker 2 is empty.
func pressureFleet(t *testing.T, w float64, want []uint32) *Engine {
	t.Helper()
	cfg := KVSelectDefaults()
	cfg.KVPressureWeight = w
	e := newEngine(t, &cfg)
	for id := uint64(1); id <= 2; id++ {
		mustUpsert(t, e, spec(id, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(20)) }))
	}
	store(t, e, Owner{Worker: 1}, want[:16])
	run := selReq("running", toks(90_000, 76))
	run.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(0))}
	if _, err := e.SelectAndReserve(run, t0); err != nil {
		t.Fatal(err)
	}
	noErr(t, e.PrefillCompleteAt("running", t0))
	return e
}

// TestPressureMovesOffAFullRank: with the term off, the request goes to the rank holding its
// prefix; with it on, the 7 blocks by which that rank's pinned blocks would exceed its capacity
// (19 + 8 − 20) cost more than the 4 cached blocks save, and it goes to the empty rank.
func TestPressureMovesOffAFullRank(t *testing.T) {
	want := toks(1, 32)
	for _, c := range []struct {
		w      float64
		worker uint64
	}{{0, 1}, {1, 2}} {
		e := pressureFleet(t, c.w, want)
		r, err := e.Select(selReq("", want), t0)
		noErr(t, err)
		if r.WorkerID != c.worker {
			t.Errorf("kv_pressure_weight %v: worker %d, want %d", c.w, r.WorkerID, c.worker)
		}
	}
}

// TestPressureTerm checks the term's arithmetic: zero with room, unknown capacity or weight 0;
// the overflow in blocks × block size × per-token cost × weight otherwise, booked blocks not
// counted twice.
func TestPressureTerm(t *testing.T) {
	k := kvselectTerms{w: weights{pressure: 2}, bs: 4, islBlocks: 8}
	cases := []struct {
		active uint64
		booked int
		invCap float64
		want   float64
	}{
		{10, 0, 1.0 / 20, 0},               // 10 + 8 ≤ 20
		{19, 0, 1.0 / 20, 2 * 0.5 * 4 * 7}, // 7 blocks over
		{19, 3, 1.0 / 20, 2 * 0.5 * 4 * 4}, // 3 of the request's blocks already pinned there
		{19, 0, 0, 0},                      // capacity unknown
	}
	for _, c := range cases {
		if got := k.pressureMS(c.active, c.booked, c.invCap, 0.5); got != c.want {
			t.Errorf("pressureMS(%d, %d, %v) = %v, want %v", c.active, c.booked, c.invCap, got, c.want)
		}
	}
	k.w.pressure = 0
	if got := k.pressureMS(19, 0, 1.0/20, 0.5); got != 0 {
		t.Errorf("weight 0: %v", got)
	}
}
