package engine

import (
	"math"
	"testing"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/kvwire"
)

// speedTerms is a kvselectTerms over ranks with the given per-token costs (the prior's shape
// scaled), prior B = 1.
func speedTerms(fixed bool, bs ...float64) kvselectTerms {
	k := kvselectTerms{w: weights{prior: PrefillModel{A: 0.001, B: 1, C: 10}, missWork: 1, fixedSpeed: fixed, robust: true}}
	for _, b := range bs {
		k.observeRank(load.SpeedModel{A: 0.001 * b, B: b, C: 10 * b}, 0)
	}
	return k
}

// TestPriceAgainstConsensus: ranks whose learned speeds straddle what used to be the deadband's
// edge around the prior (1.9 and 2.1 × the prior) are priced alike, at the consensus, and so is
// a rank 1.4× the consensus; a rank 2× the consensus at its own speed; a rank whose speed is not
// known yet at the consensus; with learning off, or nothing known, the prior.
func TestPriceAgainstConsensus(t *testing.T) {
	k := speedTerms(false, 1.9, 2.1, 2.0, 2.0)
	lo, hi := k.price(load.SpeedModel{A: 0.0019, B: 1.9, C: 19}), k.price(load.SpeedModel{A: 0.0021, B: 2.1, C: 21})
	if lo != hi || math.Abs(lo.B-2) > 1e-12 || math.Abs(lo.A-0.002) > 1e-12 || math.Abs(lo.C-20) > 1e-9 {
		t.Errorf("straddling ranks priced %+v and %+v, want both the prior scaled to B = 2", lo, hi)
	}
	k = speedTerms(false, 2, 2, 2, 6)
	slow := load.SpeedModel{A: 0.006, B: 6, C: 60}
	if got := k.price(slow); got != slow {
		t.Errorf("a rank 2× the consensus (3) priced %+v, want its own %+v", got, slow)
	}
	if got := k.price(load.SpeedModel{A: 0.0025, B: 2.5, C: 25}); math.Abs(got.B-3) > 1e-12 {
		t.Errorf("a rank within 1.25× of the consensus (3) priced at B = %v, want 3", got.B)
	}
	// 1.4× the consensus is what identical batching ranks learn from their loads alone (a busier
	// rank batches more and measures faster): priced at the consensus too.
	k = speedTerms(false, 1, 1, 1, 1.6)
	if got := k.price(load.SpeedModel{A: 0.0016, B: 1.6, C: 16}); math.Abs(got.B-1.15) > 1e-12 {
		t.Errorf("a rank 1.39× the consensus (1.15) priced at B = %v, want 1.15", got.B)
	}
	prior := load.SpeedModel{A: 0.001, B: 1, C: 10}
	fixed, none, one := speedTerms(true, 2, 2), speedTerms(false), speedTerms(false, 2)
	if got := fixed.price(slow); got != prior {
		t.Errorf("fixed speed: priced %+v, want the prior", got)
	}
	if got := none.price(slow); got != prior {
		t.Errorf("no rank observed: priced %+v, want the prior", got)
	}
	if got := none.price(load.SpeedModel{}); got != prior {
		t.Errorf("unknown speed, no rank known: priced %+v, want the prior", got)
	}
	if got := one.price(load.SpeedModel{}); math.Abs(got.B-2) > 1e-12 || math.Abs(got.C-20) > 1e-9 {
		t.Errorf("unknown speed beside a rank known at 2× the prior: priced %+v, want the consensus (B = 2)", got)
	}
}

// TestBetaPerRank: β is the rank's own pending prefills or the partition's saturation (the share
// of ranks with work pending, each capped), whichever is more, capped at miss_work_weight. One
// hot rank with a long queue among idle ones does not make the idle ones expensive; a saturated
// fleet charges every rank the cap.
func TestBetaPerRank(t *testing.T) {
	k := kvselectTerms{w: weights{missWork: 1, robust: true}}
	for _, p := range []int{40, 0, 0, 0} {
		k.observeRank(load.SpeedModel{}, p)
	}
	if got := k.betaAt(0); got != 0.25 {
		t.Errorf("idle rank beside one hot rank: β = %v, want 0.25 (1 of 4 ranks busy)", got)
	}
	if got := k.betaAt(40); got != 1 {
		t.Errorf("hot rank: β = %v, want the cap 1", got)
	}
	k = kvselectTerms{w: weights{missWork: 1, robust: true}}
	for _, p := range []int{1, 2, 1, 0} {
		k.observeRank(load.SpeedModel{}, p)
	}
	if got := k.betaAt(0); got != 0.75 {
		t.Errorf("idle rank of a mostly busy fleet: β = %v, want 0.75", got)
	}
	k = kvselectTerms{w: weights{missWork: 0, robust: true}}
	k.observeRank(load.SpeedModel{}, 5)
	if got := k.betaAt(5); got != 0 {
		t.Errorf("miss_work_weight 0: β = %v, want 0", got)
	}
	// The default cap, 4: a rank's own queue counts up to 4, the saturation never above 1.
	k = kvselectTerms{w: weights{missWork: 4, robust: true}}
	for _, p := range []int{40, 2, 0, 0} {
		k.observeRank(load.SpeedModel{}, p)
	}
	for _, c := range []struct {
		pending int
		want    float64
	}{{40, 4}, {2, 2}, {0, 0.5}} {
		if got := k.betaAt(c.pending); got != c.want {
			t.Errorf("miss_work_weight 4, %d pending: β = %v, want %v", c.pending, got, c.want)
		}
	}
	k = kvselectTerms{w: weights{missWork: 4, robust: true}}
	for _, p := range []int{9, 7, 8, 6} {
		k.observeRank(load.SpeedModel{}, p)
	}
	if got := k.sat; got != 1 {
		t.Errorf("miss_work_weight 4, every rank busy: saturation %v, want 1", got)
	}
}

// TestPressureBetaWithinOne: the pressure term prices its overflow at (1 + min(β, 1))·B however
// long the rank's queue (kvselect_pressure.go), where the miss itself is priced at (1 + β).
func TestPressureBetaWithinOne(t *testing.T) {
	prior := PrefillModel{A: 0, B: 0.5, C: 0}
	k := kvselectTerms{w: weights{prior: prior, missWork: 4, pressure: 1, fixedSpeed: true, robust: true}, bs: 4, isl: 32, islBlocks: 8}
	k.observeRank(load.SpeedModel{}, 3)
	sp := load.SpeedModel{B: 0.5}
	// 19 active blocks + 8 of the request's − 20 capacity = 7 blocks over, 28 tokens.
	withRoom := k.costOf(0, 0, 0, 0, 0, sp, 0, 0, 0, 3, 0, 19, 0, 0, 0)
	full := k.costOf(0, 0, 0, 0, 0, sp, 0, 0, 0, 3, 0, 19, 0, 1.0/20, 0)
	if got, want := full-withRoom, (1+1)*0.5*28.0; got != want {
		t.Errorf("pressure at 3 pending = %v ms, want %v ((1 + 1) × B × 28 tokens)", got, want)
	}
	if got, want := withRoom, (1+3)*0.5*32.0; got != want {
		t.Errorf("miss at 3 pending = %v ms, want %v ((1 + 3) × B × 32 tokens)", got, want)
	}
}

// TestHotPrefixReplicatesOnIdleRank: a 4,000-token prefix cached on a rank with four queued
// 1,000-token prefills (≈ 128 ms at the prior), and three idle ranks. Under the partition-mean β
// (4 pending over 4 ranks: β = 1) an idle rank was charged 2 × 84 ms for the replica, more than
// the hot rank's 128 + 2 × 16.5 ms, and the prefix stayed; now an idle rank's β is the 1-in-4
// saturation, its replica costs 1.25 × 84 ms, and the request goes there (RobustKVSelect; the
// default keeps the partition mean and the prefix on worker 1).
func TestHotPrefixReplicatesOnIdleRank(t *testing.T) {
	for _, robust := range []bool{false, true} {
		cfg := KVSelectDefaults()
		cfg.EvictionWeight, cfg.KVPressureWeight, cfg.RobustKVSelect, cfg.ActiveRequestTokens = 0, 0, robust, 0
		if got := hotPrefixWorker(t, &cfg); (got == 1) == robust {
			t.Errorf("RobustKVSelect %v: worker %d (1 = the prefix's saturated rank)", robust, got)
		}
	}
}

// hotPrefixWorker is TestHotPrefixReplicatesOnIdleRank's fleet under cfg: the worker chosen.
func hotPrefixWorker(t *testing.T, cfg *Config) uint64 {
	t.Helper()
	e := newEngine(t, cfg)
	for id := uint64(1); id <= 4; id++ {
		mustUpsert(t, e, spec(id))
	}
	want := toks(1, 4000)
	store(t, e, kvwire.Owner{Worker: 1}, want)
	// Queue worker 1: prefills of other prompts, not complete.
	for i := range 4 {
		r := selReq("q"+string(rune('a'+i)), toks(10_000*(i+1), 1000))
		r.PinnedWorker = &PinnedWorker{WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(0))}
		if _, err := e.SelectAndReserve(r, t0); err != nil {
			t.Fatal(err)
		}
	}
	r, err := e.Select(selReq("", want), t0)
	noErr(t, err)
	return r.WorkerID
}
