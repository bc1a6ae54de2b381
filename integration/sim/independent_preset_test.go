package sim

import (
	"slices"
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

// TestIndependentPresetsRun: the SGLang-style and variant presets run through the simulator
// like the vLLM ones: by name, deterministic per seed, every request accounted for.
func TestIndependentPresetsRun(t *testing.T) {
	reqs, err := LoadTrace(tracePath(t, "mooncake_synthetic_trace.jsonl"), 300)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range slices.Concat(fleet.IndependentPresets(), fleet.VariantPresets()) {
		cfg := Config{Workers: 4, CapacityBlocks: 300, Speedup: 2, Seed: 1, Model: sp.Name, KVEventDelayMS: 5}
		for _, p := range []string{"round-robin", "sglang-like", "kvselect"} {
			a, err := RunPolicy(p, cfg, reqs)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := RunPolicy(p, cfg, reqs)
			if a != b {
				t.Fatalf("%s %s: two runs differ:\n%+v\n%+v", sp.Name, p, a, b)
			}
			if a.Model != sp.Name || a.Requests != len(reqs) || a.TTFTMean <= 0 {
				t.Fatalf("%s %s: %+v", sp.Name, p, a)
			}
		}
	}
}
