package sim

import (
	"math"
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

func TestWindows(t *testing.T) {
	reqs := []Request{{ArrivalMS: 100}, {ArrivalMS: 150}, {ArrivalMS: 400}, {ArrivalMS: 420}, {ArrivalMS: 900}}
	ws := Windows(reqs, 2)
	if len(ws) != 2 {
		t.Fatalf("%d windows, want 2 (the short last one dropped)", len(ws))
	}
	for i, want := range [][]float64{{0, 50}, {0, 20}} {
		for j, at := range want {
			if ws[i][j].ArrivalMS != at {
				t.Fatalf("window %d request %d at %v, want %v", i, j, ws[i][j].ArrivalMS, at)
			}
		}
	}
	if reqs[2].ArrivalMS != 400 {
		t.Fatal("Windows changed the trace it split")
	}
	if Windows(reqs, 0) != nil || len(Windows(reqs, 6)) != 0 {
		t.Fatal("no windows expected for n = 0 or n > len(reqs)")
	}
}

func TestCompareWindowsAgainstItself(t *testing.T) {
	reqs, err := LoadTrace(tracePath(t, "azure_llm_2023_code.csv"), 600)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := CompareWindows(Config{Workers: 4, CapacityBlocks: 100, Speedup: 4}, Windows(reqs, 200), []string{"least-loaded"}, "least-loaded")
	if err != nil {
		t.Fatal(err)
	}
	s := sums[0]
	if s.Windows != 3 || s.Requests != 200 || s.P99NotWorse != 3 || s.P50Ratio != 1 || s.P99Ratio != 1 || s.MeanRatio != 1 {
		t.Fatalf("a policy against itself: %+v", s)
	}
	if _, err := CompareWindows(Config{Workers: 1, CapacityBlocks: 1}, nil, []string{"kvselect"}, "least-loaded"); err == nil {
		t.Fatal("CompareWindows accepted no windows")
	}
}

// TestAzureWindowsGate: on the Azure code trace (no prefix reuse) replayed in windows on the
// realistic 8B engine model at a load where every worker queues, kvselect's default must have
// a shorter TTFT tail and mean than least-loaded in every window; round-robin, which ignores
// how much work it queues, must not (so the gate can fail).
func TestAzureWindowsGate(t *testing.T) {
	reqs, err := LoadTrace(tracePath(t, "azure_llm_2023_code.csv"), 4000)
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateConfig(fleet.PresetH100_8B)
	cfg.Speedup = 8
	sums, err := CompareWindows(cfg, Windows(reqs, 1000), []string{"kvselect", "round-robin"}, "least-loaded")
	if err != nil {
		t.Fatal(err)
	}
	kv, rr := sums[0], sums[1]
	for _, s := range sums {
		t.Logf("%-12s p50 ×%.3f p99 ×%.3f mean ×%.3f, p99 not worse in %d of %d", s.Policy, s.P50Ratio, s.P99Ratio, s.MeanRatio, s.P99NotWorse, s.Windows)
	}
	if kv.P99NotWorse != kv.Windows || kv.P99Ratio > 0.95 || kv.MeanRatio >= 1 || kv.P50Ratio >= 1 || kv.Rejected > 0 {
		t.Fatalf("kvselect against least-loaded over windows: %+v", kv)
	}
	if rr.P99Ratio <= 1 || math.IsNaN(rr.P99Ratio) {
		t.Fatalf("the gate accepts round-robin: %+v", rr)
	}
}
