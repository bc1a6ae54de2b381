package engine

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/kvwire"
)

// priceTerms is kvselect's terms with prior p and the partition's central learned speed c.
func priceTerms(p, c PrefillModel) kvselectTerms {
	w := weights{policy: kvselectPolicy{}, prior: p, central: c}
	return newKVSelectTerms(&normalized{isl: 4096}, 16, w)
}

// TestPriceIdenticalNoisyRanksAlike: on a fleet whose true speed is 2.5× the prior (outside the
// band, as on the SGLang-style 70B preset), identical ranks that learned speeds 20 % apart are
// priced at the same model — the partition's central one — while a rank 3× slower than the rest
// is priced at its own, slower, speed.
func TestPriceIdenticalNoisyRanksAlike(t *testing.T) {
	cfg := KVSelectDefaults()
	prior := cfg.priorSpeed(0)
	central := scaled(prior, 2.5)
	k := priceTerms(prior, central)
	var priced []load.SpeedModel
	for _, s := range []float64{2.25, 2.5, 2.75} {
		priced = append(priced, k.price(scaled(prior, s)))
	}
	for i, p := range priced {
		if p != central {
			t.Errorf("noisy identical rank %d priced %+v, want the central %+v", i, p, central)
		}
	}
	slow := scaled(prior, 7.5)
	if got := k.price(slow); got != slow {
		t.Errorf("3× slower rank priced %+v, want its own %+v", got, slow)
	}
	if !(k.price(slow).MS(4096) > 2.9*k.price(scaled(prior, 2.25)).MS(4096)) {
		t.Error("the 3× slower rank is not priced ~3× slower than its noisy peers")
	}
	// Today's rule without a central speed: every rank outside the prior's band at its own.
	k0 := priceTerms(prior, PrefillModel{})
	if a, b := k0.price(scaled(prior, 2.25)), k0.price(scaled(prior, 2.75)); a == b {
		t.Errorf("without a central speed noisy ranks priced alike (%+v): the test does not exercise the change", a)
	}
}

// TestPriceCentralNearPriorKeepsPrior: when the partition's central speed is within the band of
// the prior, ranks near it are priced at the prior (vLLM-style presets, whose prior is right
// within 2×, price as before), and a learned speed outside the band still counts; with learning
// off or an unknown speed the prior is used.
func TestPriceCentralNearPriorKeepsPrior(t *testing.T) {
	cfg := KVSelectDefaults()
	prior := cfg.priorSpeed(0)
	k := priceTerms(prior, scaled(prior, 1.3))
	for _, s := range []float64{0.6, 1, 1.3, 1.9} {
		if got := k.price(scaled(prior, s)); got != prior {
			t.Errorf("rank at %.1f× priced %+v, want the prior", s, got)
		}
	}
	fast := scaled(prior, 0.4)
	if got := k.price(fast); got != fast {
		t.Errorf("rank at 0.4× priced %+v, want its own", got)
	}
	if got := k.price(PrefillModel{}); got != prior {
		t.Errorf("unknown speed priced %+v, want the prior", got)
	}
	k.w.fixedSpeed = true
	if got := k.price(scaled(prior, 7.5)); got != prior {
		t.Errorf("fixed prefill model: priced %+v, want the prior", got)
	}
}

// TestIdenticalRanksPricedAlikeWhenPriorIsOff drives three identical ranks, each 2.5× slower
// than the configured prior, through the public lifecycle. Their learned speeds differ by
// noise; once learned, the selection prices every one at the partition's central speed, so on
// the idle fleet a prompt cached nowhere costs the same on each rank — on the fast path and on
// the general one (before, each was priced at its own estimate and the one that learned
// fastest drew the traffic). Config.CentralPrefillSpeed turns it on; off, the ranks' costs differ.
//
// The default (RobustKVSelect: consensus pricing, kvselect_speed.go) prices them alike as well;
// the central rule is checked under the earlier prior-relative rules it was built for.
func TestIdenticalRanksPricedAlikeWhenPriorIsOff(t *testing.T) {
	for _, c := range []struct {
		name            string
		robust, central bool
		alike           bool
	}{
		{"default (consensus)", true, false, true},
		{"prior band, central on", false, true, true},
		{"prior band, central off", false, false, false},
	} {
		// Seeds until the ranks learn distinct (quantised) speeds, so that noise is exercised.
		exercised := false
		for seed := uint64(5); seed < 25 && !exercised; seed++ {
			exercised = identicalRanksPricedAlike(t, c.name, c.robust, c.central, c.alike, seed)
		}
		if !exercised {
			t.Fatalf("%s: in every seed the ranks learned the same speed", c.name)
		}
	}
}

// identicalRanksPricedAlike runs one seed; it reports false, checking nothing, when every rank
// learned the same speed.
func identicalRanksPricedAlike(t *testing.T, name string, robust, central, want bool, seed uint64) bool {
	cfg := KVSelectDefaults()
	cfg.RobustKVSelect, cfg.CentralPrefillSpeed = robust, central
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1, dp(0, 3), func(s *WorkerSpec) { s.BlockSize = ptr(uint32(16)) }))
	prior := cfg.priorSpeed(0)
	truth := scaled(prior, 2.5)
	f := &synthFleet{
		truth:  map[kvwire.Owner]PrefillModel{{Worker: 1, Rank: 0}: truth, {Worker: 1, Rank: 1}: truth, {Worker: 1, Rank: 2}: truth},
		freeAt: map[kvwire.Owner]float64{}, rng: rand.New(rand.NewPCG(seed, 3)),
	}
	f.run(t, e, 900, 200) // ends with every request freed: the fleet is idle
	rows := e.LoadsWithSpeeds("", "")[0].PrefillSpeeds
	distinct := map[float64]bool{}
	for _, r := range rows {
		distinct[r.MSPerToken] = true
		if !(r.MSPerToken > 2*prior.B) || r.Samples < load.TrustedSamples {
			t.Fatalf("rank %d: %.4f ms/token after %d samples, prior %.4f: the test needs every rank learned outside the prior's band", r.DPRank, r.MSPerToken, r.Samples, prior.B)
		}
	}
	if len(distinct) < 2 {
		return false
	}
	for _, fast := range []bool{true, false} {
		e.scratch.fast.disabled = !fast
		hits := e.scratch.fast.hits
		if _, err := e.Select(selReq("", toks(99_000_000, 4096)), msTime(1e9)); err != nil {
			t.Fatal(err)
		}
		if took := e.scratch.fast.hits > hits; took != fast {
			t.Fatalf("fast path wanted %v, taken %v", fast, took)
		}
		var costs []float64
		if fast {
			costs = slices.Clone(e.scratch.fast.cost)
		} else {
			for _, c := range e.scratch.cands {
				costs = append(costs, c.cost)
			}
		}
		if len(costs) != 3 {
			t.Fatalf("%d costs, want 3", len(costs))
		}
		if alike := costs[0] == costs[1] && costs[1] == costs[2]; alike != want {
			t.Errorf("%s, fast path %v: idle identical ranks cost %v, alike %v (speeds %+v)", name, fast, costs, alike, rows)
		}
	}
	return true
}
