package sim

import (
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

// mixedFleet is the mixed fleet of these tests: H100 and A100 workers alternating (fleet.Mix),
// the same 8B model on both; the A100's prefill is about 3.2× slower per token
// (fleet.a100Llama8B), and it registers a quarter of the H100's max_num_batched_tokens.
var mixedFleet = fleet.PresetH100_8B + fleet.MixSeparator + fleet.PresetA100_8B

// TestMixedFleetRegistersEachPreset: every worker of a mixed fleet runs and registers its own
// preset — what the policies read of it (View.Worker) is its preset's batch limits, and its
// capacity is its preset's unless the configuration sets one for all.
func TestMixedFleetRegistersEachPreset(t *testing.T) {
	h, _ := fleet.Preset(fleet.PresetH100_8B)
	a, _ := fleet.Preset(fleet.PresetA100_8B)
	for _, capacity := range []int{0, 300} {
		cfg := Config{Workers: 5, CapacityBlocks: capacity, Model: mixedFleet}
		infos, err := cfg.workerInfos()
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != 5 {
			t.Fatalf("%d workers registered, want 5", len(infos))
		}
		for w, info := range infos {
			sp := h
			if w%2 == 1 {
				sp = a
			}
			want := WorkerInfo{BlockSize: TraceBlockTokens, TotalKVBlocks: sp.NumBlocks(TraceBlockTokens),
				MaxNumBatchedTokens: sp.MaxNumBatchedTokens, MaxNumSeqs: sp.MaxNumSeqs}
			if capacity > 0 {
				want.TotalKVBlocks = capacity
			}
			if info != want {
				t.Errorf("capacity %d: worker %d registers %+v, want %s's %+v", capacity, w, info, sp.Name, want)
			}
		}
	}
	if _, err := (Config{Workers: 2, Model: fleet.PresetH100_8B + "+" + fleet.PresetLegacy}).workerInfos(); err == nil {
		t.Error("a mix with the legacy preset was accepted")
	}
}

// TestMixedFleetLearnsEachSpeed: on a mixed fleet the selection engine learns each rank's own
// speed from the lifecycle alone (booking, prefill_complete, free), and prices it: the A100
// ranks learn a per-token cost about the hardware's ratio above the H100 ranks' (the presets'
// PerToken, ≈ 3.2×; a rank's learned speed also carries its queueing and batching, so the band
// is wide), and kvselect beats every speed-blind policy by a wide margin, itself with every rank
// priced at the prior (FixedPrefillModel) included. The workload has no prefix reuse (Azure
// code at 4× its rate), so the difference is placement by speed alone: Dynamo's formula and
// least-loaded count tokens and requests, which an A100 clears three times slower. Measured at
// this cell: mean 267 ms against Dynamo's 349, least-loaded's 399 and 314 without learned
// speeds; p99 2.9 s against 4.5 s, 5.6 s and 3.5 s.
func TestMixedFleetLearnsEachSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("three full simulations")
	}
	reqs, err := LoadTrace(tracePath(t, "azure_llm_2023_code.csv"), 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Workers: 8, Speedup: 4, Seed: 42, Model: mixedFleet, KVEventDelayMS: DefaultKVEventDelayMS, ScrapeIntervalMS: DefaultScrapeIntervalMS}
	kv, p, err := RunEngine("kvselect", KVSelectConfig(), cfg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	var fast, slow []float64 // learned ms per token, H100 and A100 ranks
	for _, pl := range p.Engine().LoadsWithSpeeds("", "") {
		for _, s := range pl.PrefillSpeeds {
			if s.Samples < 100 {
				t.Errorf("worker %d learned from %d samples only", s.WorkerID, s.Samples)
			}
			if (s.WorkerID-1)%2 == 0 { // worker w+1 is simulated worker w; even w are H100s
				fast = append(fast, s.MSPerToken)
			} else {
				slow = append(slow, s.MSPerToken)
			}
		}
	}
	if len(fast) != 4 || len(slow) != 4 {
		t.Fatalf("%d H100 and %d A100 ranks learned, want 4 and 4", len(fast), len(slow))
	}
	ratio := mean(slow) / mean(fast)
	t.Logf("learned ms/token: H100 ranks %.4f, A100 ranks %.4f (%.2f×; the presets' PerToken ratio 3.17×)", mean(fast), mean(slow), ratio)
	if ratio < 2 || ratio > 5 {
		t.Errorf("A100 ranks learned %.2f× the H100 ranks' per-token cost, want within [2, 5] (the hardware's 3.2×)", ratio)
	}
	blind := KVSelectConfig()
	blind.FixedPrefillModel = true // every rank priced at the prior: kvselect without its speeds
	for _, name := range []string{"dynamo", "least-loaded", "kvselect without learned speeds"} {
		var base Result
		if name == "kvselect without learned speeds" {
			base, _, err = RunEngine(name, blind, cfg, reqs)
		} else {
			base, err = RunPolicy(name, cfg, reqs)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kvselect mean %.0f ms p99 %.0f ms; %s mean %.0f ms p99 %.0f ms", kv.TTFTMean, kv.TTFTP99, name, base.TTFTMean, base.TTFTP99)
		if kv.TTFTMean > 0.9*base.TTFTMean || kv.TTFTP99 > 0.9*base.TTFTP99 {
			t.Errorf("kvselect mean %.0f ms, p99 %.0f ms: want ≤ 0.9× %s's %.0f and %.0f ms on a mixed fleet",
				kv.TTFTMean, kv.TTFTP99, name, base.TTFTMean, base.TTFTP99)
		}
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}

// TestMixedFleetMatrixCapacity: the matrix's full capacity of a mix whose caches differ is each
// worker's own preset's (0), a fraction of it the smallest preset's share for all, and a mix of
// equal caches gets the blocks explicitly, as a single preset does.
func TestMixedFleetMatrixCapacity(t *testing.T) {
	tr := &matrixTrace{maxBlocks: 40}
	h := fleet.PresetH100_8B
	for _, c := range []struct {
		preset   string
		fraction float64
		want     int
	}{
		{h + "+" + fleet.PresetH200_8B, 1, 0},
		{h + "+" + fleet.PresetH200_8B, 0.25, 193}, // a quarter of the H100's 773
		{mixedFleet, 1, 773},                       // H100 and A100 caches are equal
		{h, 1, 773},
		{h, 0.01, 50}, // raised to MinHeadroom × the largest prompt
	} {
		got, err := capacityBlocks(MatrixCapacity{Name: "c", Fraction: c.fraction}, c.preset, tr)
		if err != nil || got != c.want {
			t.Errorf("%s at %v: %d blocks (%v), want %d", c.preset, c.fraction, got, err, c.want)
		}
	}
}
