package engine

import (
	"math"
	"testing"
)

// TestCostPricesCachedContext: with a context coefficient K the kvselect cost of a rank adds
// K·t·c for the request's t uncached tokens after its c cached ones, and K·Σ tᵢ·cᵢ for the
// rank's pending prefills (load.RankLoad.PrefillCross); without one (K = 0, the legacy
// engine's share) both are free, and a miss costs the same either way.
func TestCostPricesCachedContext(t *testing.T) {
	cfg := KVSelectDefaults()
	cfg.RobustKVSelect = false // price at the configured prior, with or without K
	const bs, isl = 16, 8192 + 800
	cost := func(k float64, cachedBlocks int32, cross uint64) float64 {
		w := weightsOf(&cfg)
		w.prior.K = k
		terms := newKVSelectTerms(&normalized{isl: isl}, bs, w)
		terms.observeRank(PrefillModel{}, 1)
		return terms.costOf(cachedBlocks, 0, 0, 0, 0, PrefillModel{}, 3000, 3000*3000, cross, 1, 1, 0, 0, 0, 0)
	}
	k := 2 * cfg.PrefillModelA
	const cross = 3000 * 20_000 // the pending prefill: 3,000 tokens after 20K cached
	beta := 1.0                 // the rank's one pending prefill (betaAt)
	hit := cost(k, 8192/bs, cross) - cost(0, 8192/bs, cross)
	if want := (1+beta)*k*800*8192 + k*cross; math.Abs(hit-want) > 1e-9*want {
		t.Errorf("hit after 8,192 cached tokens: K adds %.3f ms, want %.3f", hit, want)
	}
	miss := cost(k, 0, 0) - cost(0, 0, 0)
	if miss != 0 {
		t.Errorf("a miss on a rank with no pending context costs %.3f ms more with K", miss)
	}
	if q := cost(k, 0, cross) - cost(0, 0, cross); math.Abs(q-k*cross) > 1e-9*k*cross {
		t.Errorf("pending context priced %.3f ms, want K·Σtc = %.3f", q, k*cross)
	}
}

// TestCostPricesLearnedContextInBand: without RobustKVSelect a rank whose learned speed lies
// within the band of the prior is priced at the prior's speed but at its learned context share,
// not at the prior's K (PrefillModelK, 0 by default: context priced free on such ranks only).
func TestCostPricesLearnedContextInBand(t *testing.T) {
	cfg := KVSelectDefaults()
	cfg.RobustKVSelect = false
	const bs, isl = 16, 8192 + 800
	prior := cfg.priorSpeed(0)
	cost := func(k float64) float64 {
		sp := scaled(prior, 1.5) // within 2x of the prior: priced at the prior's speed
		sp.K = k
		terms := newKVSelectTerms(&normalized{isl: isl}, bs, weightsOf(&cfg))
		terms.observeRank(sp, 0)
		return terms.costOf(8192/bs, 0, 0, 0, 0, sp, 0, 0, 0, 0, 1, 0, 0, 0, 0)
	}
	k := 1.5 * 0.8 * 2 * prior.A // the rank's factor × share 0.8 × kRef
	want := (0.8 * 2 * prior.A) * 800 * 8192
	if got := cost(k) - cost(0); math.Abs(got-want) > 1e-9*want {
		t.Errorf("learned context share on a rank priced at the prior adds %.3f ms, want %.3f", got, want)
	}
}
