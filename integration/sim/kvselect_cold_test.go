package sim

import (
	"slices"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/integration/fleet"
)

// routed counts the requests each worker is routed.
type routed struct {
	Policy
	n []int
}

func (s *routed) Pick(v *View, id int, r *Request) int {
	w := s.Policy.Pick(v, id, r)
	if w >= 0 {
		s.n[w]++
	}
	return w
}

// TestColdCacheIsRefilled is the case that made the cold-cache discount (engine.Config's
// ColdCacheShare): agentic sessions beside system-prompt traffic on tight caches (the
// robustness matrix's mixed/s1/tight cell at its 1 s load, SGLang-style 8B model, seed 42).
// Without the discount one worker's cache filled early, it was then the fullest by a hair and
// lost every near tie, got 18 of the 2,000 requests and sat idle while the other seven thrashed
// (hit rate 56 %). With it the cold worker takes misses again: every worker gets a share of the
// traffic, reuse and mean TTFT recover.
func TestColdCacheIsRefilled(t *testing.T) {
	if testing.Short() {
		t.Skip("two full simulations")
	}
	reqs, err := Synth("mixed?sessions=16&requests=2000&seed=1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Workers: 8, CapacityBlocks: 335, Speedup: 0.771, Seed: 42, Model: fleet.PresetSGLangH100_8B, KVEventDelayMS: 5, ScrapeIntervalMS: 50}
	run := func(ec engine.Config) (Result, []int) {
		infos, err := cfg.workerInfos()
		if err != nil {
			t.Fatal(err)
		}
		ep, err := NewEnginePolicyForWorkers("kvselect", ec, infos, cfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		s := &routed{Policy: ep, n: make([]int, cfg.Workers)}
		res, err := Run(cfg, reqs, s, ep)
		if err != nil {
			t.Fatal(err)
		}
		return res, s.n
	}
	on, onN := run(KVSelectConfig())
	// Off is the default of the time without the discount; cache stickiness came later.
	noDiscount := KVSelectNoStickConfig()
	noDiscount.ColdCacheShare = 0
	off, offN := run(noDiscount)
	t.Logf("discount on: mean %.0f ms, hit %.3f, requests per worker %v; off: mean %.0f ms, hit %.3f, %v",
		on.TTFTMean, on.HitRate, onN, off.TTFTMean, off.HitRate, offN)
	if least := slices.Min(onN); least < len(reqs)/40 {
		t.Errorf("a worker got %d of %d requests with the discount (fewer than a fifth of its fair share)", least, len(reqs))
	}
	if !(on.HitRate > off.HitRate+0.1) || !(on.TTFTMean < 0.75*off.TTFTMean) {
		t.Errorf("discount on: hit %.3f, mean %.0f ms; off: %.3f, %.0f ms (want +10 points of hit rate and −25 %% mean)",
			on.HitRate, on.TTFTMean, off.HitRate, off.TTFTMean)
	}
}
