package sim

import (
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

func TestZZDiagK(t *testing.T) {
	for _, c := range []struct{ trace, model string; sp float64; capb int }{
		{"sysprompt?requests=3000&prompts=4&zipf=2.5&sys=16384&shared=0.95&seed=2", fleet.PresetH100_8B, 1.3, 773},
		{"sysprompt?requests=3000&prompts=4&zipf=2.5&sys=16384&shared=0.95&seed=2", fleet.PresetLegacy, 1.3, 4000},
		{"agentic?seed=1", fleet.PresetLegacy, 4, 1000},
		{"mixed?sessions=16&requests=2000&seed=1", "sglang-h100-8b", 0.8, 335},
		{"mixed?sessions=16&requests=2000&seed=1", fleet.PresetH100x870, 2, 2400},
	} {
		reqs, err := Synth(c.trace)
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Workers: 8, CapacityBlocks: c.capb, Speedup: c.sp, Seed: 42, Model: c.model, KVEventDelayMS: 5}
		sp, capacity, _ := cfg.spec()
		info := WorkerInfo{BlockSize: TraceBlockTokens, TotalKVBlocks: capacity, MaxNumBatchedTokens: sp.MaxNumBatchedTokens, MaxNumSeqs: sp.MaxNumSeqs}
		p, err := NewEnginePolicyFor("kvselect", KVSelectConfig(), info, cfg.Workers, cfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(cfg, reqs, p, p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %s: mean %.0f p99 %.0f", c.trace, c.model, res.TTFTMean, res.TTFTP99)
		for _, pl := range p.Engine().LoadsWithSpeeds("", "") {
			for _, s := range pl.PrefillSpeeds {
				if s.WorkerID < 3 { t.Logf("  w%d B %.4f K %.3g (K/2A %.2f) n %d", s.WorkerID, s.MSPerToken, s.MSPerTokenContextToken, s.MSPerTokenContextToken/(2*s.MSPerTokenSquared), s.Samples) }
			}
		}
	}
}
