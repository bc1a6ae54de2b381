package sim

import (
	"slices"
	"testing"
)

// The cache-aware baselines must find the reuse a conversation trace offers: on agentic
// sessions (each turn extends the last) every one of them clearly beats round-robin's hit
// rate, and every baseline is deterministic per seed.
func TestCacheAwareBaselinesBeatRoundRobin(t *testing.T) {
	reqs, err := LoadTrace("synth:agentic?sessions=12&turns=8&context=16000&system=2048&think=4&seed=1", 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Workers: 4, CapacityBlocks: 400, Speedup: 4, Seed: 7}
	run := func(name string) Result {
		t.Helper()
		r, err := RunPolicy(name, cfg, reqs)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rejected != 0 {
			t.Fatalf("%s rejected %d", name, r.Rejected)
		}
		t.Logf("%-13s hit %5.1f%%  TTFT p50 %6.0f  p99 %6.0f  mean %6.0f ms  CV %.3f", name, 100*r.HitRate, r.TTFTP50, r.TTFTP99, r.TTFTMean, r.LoadCV)
		return r
	}
	rr := run("round-robin")
	for _, name := range []string{"sglang", "llm-d", "max-overlap"} {
		if r := run(name); r.HitRate < rr.HitRate+0.10 {
			t.Errorf("%s hit rate %.3f, want ≥ round-robin's %.3f + 0.10", name, r.HitRate, rr.HitRate)
		}
	}
	for _, name := range PolicyNames {
		if a, b := run(name), run(name); a != b {
			t.Errorf("%s: two runs differ:\n%+v\n%+v", name, a, b)
		}
	}
	for name := range engineConfigs {
		if !slices.Contains(PolicyNames, name) {
			t.Errorf("engine policy %q is not in PolicyNames", name)
		}
	}
}
