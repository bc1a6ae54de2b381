package sim

import (
	"strings"
	"testing"
)

// TestMatrixScrapesLikeTheSimulator: the matrix reads worker metrics at kvselect-sim's scrape
// interval and writes it into each reproduction command, so a policy that reads scraped
// metrics (llm-d) scores the same in the matrix as in the command that claims to replay the
// cell. (The matrix once read the metrics live while the command scraped every 50 ms.)
func TestMatrixScrapesLikeTheSimulator(t *testing.T) {
	if FullMatrix("", nil).ScrapeIntervalMS != DefaultScrapeIntervalMS || QuickMatrix().ScrapeIntervalMS != DefaultScrapeIntervalMS {
		t.Fatal("the built-in matrices must scrape at kvselect-sim's default interval")
	}
	spec := "synth:sysprompt?requests=300&prompts=4&sys=2048&user=256&output=32&rate=40&seed=3"
	m := Matrix{
		Workloads:        []MatrixWorkload{{Name: "chat", Trace: spec}},
		Workers:          []int{3},
		Presets:          []string{"h100-8b"},
		Rivals:           []string{"round-robin", "llm-d"},
		Targets:          []float64{1000},
		OverloadFactor:   -1,
		Parallel:         1,
		KVEventDelayMS:   DefaultKVEventDelayMS,
		ScrapeIntervalMS: DefaultScrapeIntervalMS,
	}
	rep, err := RunMatrix(m)
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := Synth(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Cells[0]
	nm, err := m.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if cmd := reproCommand(&c, &nm, "kvselect", c.Verdicts[0]); !strings.Contains(cmd, " --scrape-interval 50ms ") {
		t.Fatalf("reproduction command without the scrape interval: %s", cmd)
	}
	cfg := Config{Workers: c.Workers, CapacityBlocks: c.CapacityBlocks, Speedup: c.Load.Speedup, Seed: nm.Seed,
		Model: c.Preset, KVEventDelayMS: DefaultKVEventDelayMS, ScrapeIntervalMS: DefaultScrapeIntervalMS}
	r, err := RunPolicy("llm-d", cfg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Stats["llm-d"]; got.MeanMS != r.TTFTMean || got.P99MS != r.TTFTP99 || got.HitRate != r.HitRate {
		t.Fatalf("llm-d in the matrix %+v, as the command replays it: mean %v p99 %v hit %v", got, r.TTFTMean, r.TTFTP99, r.HitRate)
	}
}
