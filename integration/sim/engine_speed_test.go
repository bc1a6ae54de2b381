package sim

import (
	"math"
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

// TestLearnedSpeedConvergesInSim replays 500 requests of the Mooncake synthetic trace through
// kvselect's engine on the legacy worker model (one FIFO prefill per worker) and checks that
// every worker's learned prefill model is within 10 % of the simulator's polynomial
// (fleet.LegacyPrefillMS), which the engine never sees.
func TestLearnedSpeedConvergesInSim(t *testing.T) {
	reqs, err := LoadTrace(tracePath(t, "mooncake_synthetic_trace.jsonl"), 500)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Workers: 4, CapacityBlocks: 4000, Speedup: 1, Seed: 1, Model: fleet.PresetLegacy}
	ec := KVSelectConfig()
	// A prior 3× too fast: what is checked is learned, not assumed.
	ec.PrefillModelA, ec.PrefillModelB, ec.PrefillModelC = ec.PrefillModelA/3, ec.PrefillModelB/3, ec.PrefillModelC/3
	p, err := NewEnginePolicy("kvselect", ec, cfg.Workers, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(cfg, reqs, p, p); err != nil {
		t.Fatal(err)
	}
	for _, pl := range p.Engine().LoadsWithSpeeds("", "") {
		for _, s := range pl.PrefillSpeeds {
			for _, tok := range []float64{1000, 8000} {
				got := (s.MSPerTokenSquared*tok+s.MSPerToken)*tok + s.OverheadMS
				want := fleet.LegacyPrefillMS(int(tok))
				if e := math.Abs(got-want) / want; e > 0.10 || s.Samples < 50 {
					t.Errorf("worker %d after %d samples: %.1f ms at %v tokens, simulator %.1f ms (%.0f%% off)",
						s.WorkerID, s.Samples, got, tok, want, 100*e)
				}
			}
		}
	}
}
