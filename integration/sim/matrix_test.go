package sim

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

// quadProbe is a load probe whose p99 is idle + k·s² ms: a smooth, monotone queueing curve.
func quadProbe(idle, k float64) *loadProbe {
	return &loadProbe{measure: func(s float64) (float64, error) { return idle + k*s*s, nil }}
}

func TestSearchSpeedupFindsTheCrossing(t *testing.T) {
	for _, tc := range []struct{ k, target float64 }{{100, 1000}, {100, 5000}, {1, 1e6}, {1e6, 2000}} {
		p := quadProbe(0, tc.k)
		s, v, ok, err := searchSpeedup(p, tc.target, 1, 0.1)
		if err != nil || !ok {
			t.Fatalf("k %g target %g: ok %v err %v", tc.k, tc.target, ok, err)
		}
		exact := math.Sqrt(tc.target / tc.k)
		// s reaches the target, lies at most 10 % (plus three-digit rounding) above the
		// crossing, and has three significant digits.
		if v < tc.target || s < exact || s > exact*1.1*1.005 || round3(s) != s {
			t.Fatalf("k %g target %g: speedup %v (p99 %v), crossing at %v", tc.k, tc.target, s, v, exact)
		}
		if p.runs > 20 {
			t.Fatalf("k %g target %g: %d measurements", tc.k, tc.target, p.runs)
		}
	}
	// Reached even at the lowest speedup: the answer is the lowest one tried.
	s, _, ok, _ := searchSpeedup(quadProbe(9000, 1), 5000, 1, 0.1)
	if !ok || s >= 2*searchMinSpeedup {
		t.Fatalf("always above the target: speedup %v ok %v", s, ok)
	}
	// Never reached: no load.
	if _, _, ok, _ := searchSpeedup(quadProbe(0, 1e-9), 5000, 1, 0.1); ok {
		t.Fatal("an unreachable target was found")
	}
}

func TestFindLoadsCountsFromIdle(t *testing.T) {
	p := quadProbe(3000, 100)
	loads, idle, missing, err := findLoads(p, []float64{1000, 5000}, 2, 0.1)
	if err != nil || len(missing) > 0 || len(loads) != 3 {
		t.Fatalf("loads %+v missing %v err %v", loads, missing, err)
	}
	if math.Abs(idle-3000) > 1 {
		t.Fatalf("idle p99 %v, want ~3000", idle)
	}
	for i, want := range []float64{math.Sqrt(10), math.Sqrt(50)} {
		l := loads[i]
		if !l.Strict || l.Speedup < want || l.Speedup > want*1.11 || l.RoundRobinP99MS < l.TargetMS {
			t.Fatalf("load %d: %+v, crossing at %v", i, l, want)
		}
	}
	if o := loads[2]; o.Strict || o.Name != "overload" || o.Speedup != round3(2*loads[1].Speedup) {
		t.Fatalf("overload %+v after %+v", o, loads[1])
	}
	if loads[0].Name != "p99+1s" || loads[1].Name != "p99+5s" {
		t.Fatalf("names %q %q", loads[0].Name, loads[1].Name)
	}
	// A curve that jumps past both targets at once gives one cell under both names.
	step := &loadProbe{measure: func(s float64) (float64, error) {
		if s >= 3 {
			return 1e5, nil
		}
		return 100, nil
	}}
	loads, _, _, _ = findLoads(step, []float64{1000, 5000}, -1, 0.1)
	if len(loads) != 1 || loads[0].Name != "p99+1s,p99+5s" {
		t.Fatalf("step curve: %+v", loads)
	}
}

// fakeRun models a fleet for the matrix machinery: round-robin's p99 is 100·s² ms, rivals
// scale it, and kvselect's figures are fixed multiples of the best rival's so that the verdicts
// are known in advance.
func fakeRun(policy string, cfg Config, reqs []Request) (Result, error) {
	base := 100 * cfg.Speedup * cfg.Speedup
	r := Result{Policy: policy, Requests: len(reqs), TTFTMean: base / 2, TTFTP50: base / 4, TTFTP99: base, HitRate: 0.1, LoadCV: 0.0}
	switch policy {
	case "least-loaded": // the best mean and p99
		r.TTFTMean, r.TTFTP99, r.LoadCV = base/4, base/2, 0.05
	case "sglang": // the best p50 and hit rate
		r.TTFTP50, r.HitRate, r.LoadCV = base/8, 0.6, 0.3
	case "kvselect":
		// mean 0.8× least-loaded's, p50 1.0× sglang's, p99 1.2× least-loaded's; at the
		// overload point (above 10×; the 5 s load is near 7.1×) the mean is 1.3×.
		r.TTFTMean, r.TTFTP50, r.TTFTP99, r.HitRate, r.LoadCV = 0.8*base/4, base/8, 1.2*base/2, 0.55, 0.2
		if cfg.Speedup > 10 {
			r.TTFTMean = 1.3 * base / 4
		}
	}
	return r, nil
}

func fakeMatrix() Matrix {
	return Matrix{
		Workloads: []MatrixWorkload{{Name: "tiny", Trace: "synth:sysprompt?requests=20&seed=3"}},
		Presets:   []string{"legacy"},
		Rivals:    []string{"round-robin", "least-loaded", "sglang"},
		Run:       fakeRun,
	}
}

func TestMatrixVerdictsAndFailureListing(t *testing.T) {
	rep, err := RunMatrix(fakeMatrix())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != 1 || len(rep.Cells) != 3 {
		t.Fatalf("%d groups, %d cells, want 1 and 3 (two targets and the overload point)", len(rep.Groups), len(rep.Cells))
	}
	for i, c := range rep.Cells {
		v := c.Verdicts[0]
		if v.Candidate != "kvselect" || v.BestMean != "least-loaded" || v.BestP50 != "sglang" || v.BestP99 != "least-loaded" || v.BestHit != "sglang" {
			t.Fatalf("cell %s: best rivals %+v", c.ID, v)
		}
		if math.Abs(v.P99Ratio-1.2) > 1e-9 || math.Abs(v.P50Ratio-1) > 1e-9 {
			t.Fatalf("cell %s: ratios %+v", c.ID, v)
		}
		wantMean := 0.8
		if i == 2 {
			wantMean = 1.3
		}
		if math.Abs(v.MeanRatio-wantMean) > 1e-9 || v.BestMeanLoadCV != 0.05 || v.BestHitRate != 0.6 {
			t.Fatalf("cell %s: mean ratio %v (want %v), %+v", c.ID, v.MeanRatio, wantMean, v)
		}
		// Strict loads fail on p99 alone; the overload point on the mean alone.
		want := "p99 1.20× > 1.00× (least-loaded)"
		if i == 2 {
			want = "mean 1.30× > 1.25× (least-loaded)"
		}
		if v.Pass || len(v.Failures) != 1 || v.Failures[0] != want {
			t.Fatalf("cell %s: failures %q, want [%q]", c.ID, v.Failures, want)
		}
		if !strings.Contains(v.Repro, "--trace 'synth:sysprompt?requests=20&seed=3'") ||
			!strings.Contains(v.Repro, "--policies kvselect,least-loaded,sglang,round-robin") ||
			!strings.Contains(v.Repro, "--model legacy") || !strings.Contains(v.Repro, "--capacity-blocks 4000") {
			t.Fatalf("cell %s: repro %q", c.ID, v.Repro)
		}
	}
	if rep.Pass() || len(rep.Failures) != 3 || rep.Summary[0].Passed != 0 || rep.Summary[0].WorstMean != 1.3 || len(rep.Summary[0].PerSeed) != 0 {
		t.Fatalf("summary %+v, %d failures", rep.Summary, len(rep.Failures))
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Failures {
		if !strings.Contains(md.String(), f.Repro) || !strings.Contains(md.String(), f.Cell) {
			t.Fatalf("markdown misses failing cell %s or its command:\n%s", f.Cell, md.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back MatrixReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Failures) != 3 || back.Cells[0].Stats["sglang"].HitRate != 0.6 {
		t.Fatalf("JSON round trip: %v %+v", err, back.Failures)
	}
	// A looser bar passes every cell: the failures came from the bar, not from the machinery.
	m := fakeMatrix()
	m.Bar = Bar{StrictMean: 0.9, StrictP99: 1.25, StrictP50: 1.05, Mean: 1.5}
	if rep, err = RunMatrix(m); err != nil || !rep.Pass() {
		t.Fatalf("looser bar: err %v failures %+v", err, rep.Failures)
	}
}

func TestAggregateStatsOverWindows(t *testing.T) {
	runs := [][]Request{{{Input: 100}}, {{Input: 300}}}
	s := aggregateStats([]Result{
		{TTFTMean: 100, TTFTP50: 10, TTFTP99: 1000, HitRate: 0.2, LoadCV: 0.1, Rejected: 1},
		{TTFTMean: 400, TTFTP50: 40, TTFTP99: 4000, HitRate: 0.6, LoadCV: 0.3, Rejected: 2},
	}, runs)
	if math.Abs(s.MeanMS-200) > 1e-9 || math.Abs(s.P50MS-20) > 1e-9 || math.Abs(s.P99MS-2000) > 1e-9 ||
		math.Abs(s.HitRate-0.5) > 1e-12 || math.Abs(s.LoadCV-0.2) > 1e-12 || s.Rejected != 3 {
		t.Fatalf("aggregate %+v", s)
	}
}

func TestMatrixSpecChecks(t *testing.T) {
	bad := []Matrix{
		{},
		{Workloads: []MatrixWorkload{{Name: "a", Trace: "x"}, {Name: "a", Trace: "y"}}},
		{Workloads: []MatrixWorkload{{Name: "a", Trace: "x"}}, Targets: []float64{5000, 1000}},
		{Workloads: []MatrixWorkload{{Name: "a", Trace: "x"}}, Candidates: []string{"sglang"}, Rivals: []string{"sglang"}},
		{Workloads: []MatrixWorkload{{Name: "a", Trace: "x"}}, OverloadFactor: 0.5},
		{Workloads: []MatrixWorkload{{Name: "a", Trace: "x"}}, Capacities: []MatrixCapacity{{Name: "t", Fraction: -1}}},
	}
	for i, m := range bad {
		if _, err := m.Normalize(); err == nil {
			t.Fatalf("spec %d accepted: %+v", i, m)
		}
	}
	if _, err := RunMatrix(Matrix{Workloads: []MatrixWorkload{{Name: "a", Trace: "synth:nosuchshape"}}}); err == nil {
		t.Fatal("an unknown synth shape ran")
	}
}

// TestMatrixRealAndDeterministic runs a tiny matrix on the real simulator: a tight cache is
// raised to hold the largest request, and the report is the same at any parallelism.
func TestMatrixRealAndDeterministic(t *testing.T) {
	m := Matrix{
		Workloads:  []MatrixWorkload{{Name: "chat", Trace: "synth:sysprompt?requests=150&prompts=4&sys=2048&user=256&output=32&rate=20&seed=2"}},
		Capacities: []MatrixCapacity{{Name: "tight", Fraction: 0.001}},
		Workers:    []int{3},
		Presets:    []string{"h100-8b"},
		Rivals:     []string{"round-robin", "least-loaded"},
		Targets:    []float64{1000},
		Parallel:   1,
	}
	one, err := RunMatrix(m)
	if err != nil {
		t.Fatal(err)
	}
	m.Parallel = 4
	four, err := RunMatrix(m)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := one.WriteJSON(&a); err != nil {
		t.Fatal(err)
	}
	if err := four.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatal("the report depends on the parallelism")
	}
	g := one.Groups[0]
	if len(g.Loads) != 2 || g.CapacityBlocks < 2 || g.SearchRuns < 3 {
		t.Fatalf("group %+v", g)
	}
	for _, c := range one.Cells {
		for _, p := range []string{"kvselect", "round-robin", "least-loaded"} {
			if st, ok := c.Stats[p]; !ok || st.P99MS <= 0 || st.Rejected != 0 {
				t.Fatalf("cell %s policy %s: %+v", c.ID, p, st)
			}
		}
		if l := c.Load; l.Strict && l.RoundRobinP99MS < g.IdleP99MS+1000 {
			t.Fatalf("cell %s: round-robin p99 %v below idle %v + 1 s", c.ID, l.RoundRobinP99MS, g.IdleP99MS)
		}
	}
}

func TestLoadWorkloadWindowsAndSpan(t *testing.T) {
	w := MatrixWorkload{Name: "w", Trace: "synth:sysprompt?requests=100&rate=10&seed=1", Windows: 30}
	tr, err := loadWorkload(w)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.runs) != 3 || len(tr.runs[0]) != 30 || tr.runs[1][0].ArrivalMS != 0 {
		t.Fatalf("%d windows of %d", len(tr.runs), len(tr.runs[0]))
	}
	// 30 Poisson arrivals at 10/s span about 3 s.
	if tr.spanMS < 1000 || tr.spanMS > 6000 || tr.maxBlocks < 1 {
		t.Fatalf("span %v ms, max blocks %d", tr.spanMS, tr.maxBlocks)
	}
	if _, err := loadWorkload(MatrixWorkload{Name: "short", Trace: w.Trace, Windows: 1000}); err == nil {
		t.Fatal("a trace shorter than one window was accepted")
	}
}

// TestMatrixPresetsCoverTheShapes keeps the built-in matrices honest: the full one holds the
// four shared traces (the Azure ones windowed), hot shared prefixes, long agentic sessions,
// short chat and no reuse in two seeds, both capacities and every preset; every synth spec
// parses.
func TestMatrixPresetsCoverTheShapes(t *testing.T) {
	full, err := FullMatrix("/traces", fleet.PresetNames()).Normalize()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]MatrixWorkload{}
	for _, w := range full.Workloads {
		names[w.Name] = w
		if strings.HasPrefix(w.Trace, SynthPrefix) {
			if _, err := Synth(w.Trace); err != nil {
				t.Fatalf("%s: %v", w.Name, err)
			}
		}
	}
	for _, n := range []string{"mooncake-conv", "mooncake-synth", "azure-code", "azure-conv",
		"sysprompt-hot/s1", "sysprompt-onehot/s2", "agentic/s1", "agentic-long/s2", "mixed/s1", "chat-short/s2", "no-reuse/s1"} {
		if _, ok := names[n]; !ok {
			t.Fatalf("full matrix lacks %s", n)
		}
	}
	if names["azure-code"].Windows == 0 || names["azure-conv"].Windows == 0 || names["mooncake-conv"].Windows != 0 {
		t.Fatal("the Azure traces must be windowed, the Mooncake ones whole")
	}
	if len(full.Capacities) != 2 || len(full.Presets) != len(fleet.PresetNames()) || full.KVEventDelayMS != DefaultKVEventDelayMS {
		t.Fatalf("full matrix grid %+v %v %v", full.Capacities, full.Presets, full.KVEventDelayMS)
	}
	if slices.Contains(full.Rivals, "kvselect") || !slices.Contains(full.Rivals, "sglang") || !slices.Contains(full.Rivals, "llm-d") {
		t.Fatalf("rivals %v", full.Rivals)
	}
	if _, err := QuickMatrix().Normalize(); err != nil {
		t.Fatal(err)
	}
}

// TestMatrixSeeds: with two policy seeds every cell runs once per seed as its own
// configuration — IDs suffixed /seedN, reproduction commands with that seed, tallies per seed
// summing to the totals — while each group's load search (round-robin, seed-free) runs once.
func TestMatrixSeeds(t *testing.T) {
	m := fakeMatrix()
	m.Seeds = []uint64{42, 7}
	var mu sync.Mutex
	searched := map[uint64]int{}
	m.Run = func(policy string, cfg Config, reqs []Request) (Result, error) {
		r, err := fakeRun(policy, cfg, reqs)
		if policy == "round-robin" {
			mu.Lock()
			searched[cfg.Seed]++
			mu.Unlock()
		}
		if policy == "kvselect" && cfg.Seed == 7 {
			r.TTFTMean *= 2 // seed 7's kvselect: mean 1.6× (2.6× at the overload point)
		}
		return r, err
	}
	rep, err := RunMatrix(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Groups) != 2 || len(rep.Cells) != 6 {
		t.Fatalf("%d groups, %d cells, want 2 and 6", len(rep.Groups), len(rep.Cells))
	}
	if g := rep.Groups; g[0].Seed != 42 || g[1].Seed != 7 || !slices.Equal(g[0].Loads, g[1].Loads) || g[1].SearchRuns != 0 || g[0].SearchRuns == 0 {
		t.Fatalf("groups: %+v", g)
	}
	// Round-robin runs at seed 7 only in the cells (three), never in a search.
	if searched[7] != 3 || searched[42] <= 3 {
		t.Fatalf("round-robin runs per seed: %v", searched)
	}
	for _, c := range rep.Cells {
		want := "/seed" + strconv.FormatUint(c.Seed, 10) + "/"
		if !strings.Contains(c.ID, want) || !strings.Contains(c.Verdicts[0].Repro, "--seed "+strconv.FormatUint(c.Seed, 10)+" ") {
			t.Fatalf("cell %s (seed %d): repro %q", c.ID, c.Seed, c.Verdicts[0].Repro)
		}
	}
	s := rep.Summary[0]
	if len(s.PerSeed) != 2 || s.PerSeed[0].Seed != 42 || s.PerSeed[1].Seed != 7 {
		t.Fatalf("per seed: %+v", s.PerSeed)
	}
	a, b := s.PerSeed[0], s.PerSeed[1]
	if a.Cells != 3 || b.Cells != 3 || s.Cells != 6 || a.AboveBound != 1 || b.AboveBound != 3 || s.AboveBound != 4 ||
		math.Abs(b.WorstMean-2.6) > 1e-9 || s.WorstMean != b.WorstMean || a.Passed+b.Passed != s.Passed {
		t.Fatalf("tallies: total %+v, seed 42 %+v, seed 7 %+v", s.MatrixTally, a.MatrixTally, b.MatrixTally)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "Seeds 42, 7") || !strings.Contains(md.String(), "| 7 | 3 | 0 | 3 |") {
		t.Fatalf("markdown lacks the seeds or the per-seed table:\n%s", md.String())
	}
	m.Seeds = []uint64{7, 7}
	if _, err := RunMatrix(m); err == nil {
		t.Fatal("duplicate seeds accepted")
	}
}
