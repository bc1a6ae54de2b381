package engine

import (
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// twoRankFleet registers workers 1 and 2 (block size 4), each spec changed by with, on an engine
// with cfg.
func twoRankFleet(t *testing.T, cfg *Config, with func(*WorkerSpec)) *Engine {
	t.Helper()
	e := newEngine(t, cfg)
	for id := uint64(1); id <= 2; id++ {
		mustUpsert(t, e, spec(id, with))
	}
	return e
}

// capacityFleet is a twoRankFleet with total_kv_blocks 20 each: the fixture of the kvselect
// terms that need a registered capacity.
func capacityFleet(t *testing.T, cfg *Config) *Engine {
	t.Helper()
	return twoRankFleet(t, cfg, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(20)) })
}

// pressureFleet is a capacityFleet on a kvselect engine with kv_pressure_weight w (the
// eviction, decode, live-request and occupancy terms off, to isolate it) that caches 4 blocks
// of want's prompt on worker 1 and books there a running (prefill complete) request of 19
// other blocks: worker 1 holds the prefix but has room for 1 more pinned block, worker 2 is
// empty.
func pressureFleet(t *testing.T, w float64, want []uint32) *Engine {
	t.Helper()
	cfg := KVSelectDefaults()
	cfg.KVPressureWeight, cfg.EvictionWeight, cfg.DecodeContextWeight, cfg.ActiveRequestTokens = w, 0, 0, 0
	cfg.KVOccupancyWeight = 0
	e := capacityFleet(t, &cfg)
	store(t, e, kvwire.Owner{Worker: 1}, want[:16])
	pinned(t, e, "running", 1, toks(90_000, 76), t0)
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

// TestDecodeTerm checks the decode term's arithmetic: the booked context less the prefill not
// yet computed, read once per step the request waits for (1 + queued and own prefill tokens
// over the batch budget), at decode_context_weight × B per token; zero with weight 0 or no
// context.
func TestDecodeTerm(t *testing.T) {
	k := kvselectTerms{w: weights{decodeCtx: 0.5}, bs: 4}
	// 40 context tokens booked, 8 of them not yet prefilled: 32 read; (8 + 8) / 16 = 1 step
	// beyond the first.
	if got, want := k.decodeMS(40, 8, 8, 1.0/16, 2), 0.5*2*32*2.0; got != want {
		t.Errorf("decodeMS = %v, want %v", got, want)
	}
	if got, want := k.decodeMS(40, 8, 8, 0, 2), 0.5*2*32*1.0; got != want {
		t.Errorf("unknown budget: decodeMS = %v, want %v (one step)", got, want)
	}
	if got := k.decodeMS(8, 8, 8, 1.0/16, 2); got != 0 {
		t.Errorf("no context: %v", got)
	}
	k.w.decodeCtx = 0
	if got := k.decodeMS(40, 8, 8, 1.0/16, 2); got != 0 {
		t.Errorf("weight 0: %v", got)
	}
}

// TestDecodeTermSpreadsOffABusyRank: two empty-queued ranks, one running a long context (its
// prefill complete): with the decode term off, or on at a context share κ of 0 (an engine that
// pays for no context), the costs tie on the pure prefill and the engine draws; with it on at
// κ = 1 every request goes to the idle rank.
func TestDecodeTermSpreadsOffABusyRank(t *testing.T) {
	for _, c := range []struct{ w, kappa float64 }{{0, 1}, {1e-3, 0}, {1e-3, 1}} {
		cfg := KVSelectDefaults()
		cfg.DecodeContextWeight, cfg.KVPressureWeight, cfg.ActiveRequestTokens = c.w, 0, 0
		cfg.PrefillModelK = c.kappa * 2 * cfg.PrefillModelA // the prior share (load.ContextShareOf)
		e := budgetFleet(t, &cfg)
		runningOn(t, e, "running", 1, toks(90_000, 4000))
		onBusy := selectionsOn(t, e, 1, 40)
		if on := c.w > 0 && c.kappa > 0; on && onBusy != 0 {
			t.Errorf("decode_context_weight %v at κ %v: %d of 40 on the busy rank, want 0", c.w, c.kappa, onBusy)
		} else if !on && (onBusy == 0 || onBusy == 40) {
			t.Errorf("decode term off (weight %v, κ %v): %d of 40 on the busy rank, want a draw between tied ranks", c.w, c.kappa, onBusy)
		}
	}
}

// TestDecodeTermReadsSharedPrefixPerRequest: rank 1 runs six requests of one 1,000-token
// prompt (1,000 tokens pinned, 6,000 read every decode step), rank 2 one request of a
// 2,000-token prompt (2,000 pinned and read). Per request (the default) rank 1 reads more and
// every new request goes to rank 2; with DecodeSharedPrefixOnce the shared prompt counts once,
// rank 1 reads less and every request goes there.
func TestDecodeTermReadsSharedPrefixPerRequest(t *testing.T) {
	for _, once := range []bool{false, true} {
		cfg := KVSelectDefaults()
		cfg.KVPressureWeight, cfg.EvictionWeight, cfg.DecodeSharedPrefixOnce, cfg.ActiveRequestTokens = 0, 0, once, 0
		cfg.PrefillModelK = 2 * cfg.PrefillModelA // κ = 1 (load.ContextShareOf)
		e := budgetFleet(t, &cfg)
		for i := range 6 {
			runningOn(t, e, fmt.Sprintf("shared-%d", i), 1, toks(500_000, 1000))
		}
		runningOn(t, e, "long", 2, toks(700_000, 2000))
		on1 := selectionsOn(t, e, 1, 20)
		if want := map[bool]int{false: 0, true: 20}[once]; on1 != want {
			t.Errorf("DecodeSharedPrefixOnce %v: %d of 20 on the shared-prefix rank, want %d", once, on1, want)
		}
	}
}

// budgetFleet is a twoRankFleet with max_num_batched_tokens 64 each (the decode term's steps).
func budgetFleet(t *testing.T, cfg *Config) *Engine {
	t.Helper()
	return twoRankFleet(t, cfg, func(s *WorkerSpec) { s.MaxNumBatchedTokens = ptr(uint64(64)) })
}

// runningOn books prompt as id on worker's rank 0 and completes its prefill: a running request
// (its context read by decodes, its prefill no longer queued).
func runningOn(t *testing.T, e *Engine, id string, worker uint64, prompt []uint32) {
	t.Helper()
	r := selReq(id, prompt)
	r.PinnedWorker = &PinnedWorker{WorkerID: ptr(worker), DPRank: ptr(uint32(0))}
	if _, err := e.SelectAndReserve(r, t0); err != nil {
		t.Fatal(err)
	}
	noErr(t, e.PrefillCompleteAt(id, t0))
}

// selectionsOn counts how many of n query-only selections of fresh 16-token prompts go to
// worker.
func selectionsOn(t *testing.T, e *Engine, worker uint64, n int) int {
	t.Helper()
	on := 0
	for i := range n {
		r, err := e.Select(selReq("", toks(1000*i, 16)), t0)
		noErr(t, err)
		if r.WorkerID == worker {
			on++
		}
	}
	return on
}
