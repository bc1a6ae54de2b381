package sim

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvselect/kvselect/integration/fleet"
)

// MatrixGroup is one (workload, capacity, workers, preset) combination and the loads its
// search found.
type MatrixGroup struct {
	Workload       string       `json:"workload"`
	Capacity       string       `json:"capacity"`
	CapacityBlocks int          `json:"capacity_blocks"`
	Workers        int          `json:"workers"`
	Preset         string       `json:"preset"`
	Seed           uint64       `json:"seed"` // the policy seed (Matrix.Seeds)
	Loads          []MatrixLoad `json:"loads"`
	// IdleP99MS is round-robin's TTFT p99 on an idle fleet, the base of the targets.
	IdleP99MS float64 `json:"idle_p99_ms"`
	// Missing names the target loads round-robin never reached (see searchMaxSpeedup).
	Missing []string `json:"missing,omitempty"`
	// SearchRuns counts the round-robin measurements the search took (0 at every seed but the
	// first, whose search the group shares).
	SearchRuns int `json:"search_runs"`

	wl *matrixTrace
}

// MatrixStats is one policy's outcome in a cell. For a windowed workload the TTFT figures
// are geometric means over the windows, the hit rate is weighted by the windows' prompt
// tokens, the load CV is the windows' mean and the counts are sums.
type MatrixStats struct {
	MeanMS      float64 `json:"ttft_mean_ms"`
	P50MS       float64 `json:"ttft_p50_ms"`
	P99MS       float64 `json:"ttft_p99_ms"`
	HitRate     float64 `json:"hit_rate"`
	LoadCV      float64 `json:"load_cv"`
	Rejected    int     `json:"rejected"`
	Preemptions int     `json:"preemptions"`
}

// MatrixCell is one group at one load, with every policy's stats and each candidate's verdict.
type MatrixCell struct {
	ID             string                 `json:"id"` // workload/capacity/wN/preset/load
	Workload       string                 `json:"workload"`
	Trace          string                 `json:"trace"`
	Requests       int                    `json:"requests,omitempty"`
	Windows        int                    `json:"windows,omitempty"`
	Capacity       string                 `json:"capacity"`
	CapacityBlocks int                    `json:"capacity_blocks"`
	Workers        int                    `json:"workers"`
	Preset         string                 `json:"preset"`
	Seed           uint64                 `json:"seed"`
	Load           MatrixLoad             `json:"load"`
	Stats          map[string]MatrixStats `json:"stats"`
	Verdicts       []MatrixVerdict        `json:"verdicts"`
}

// matrixTrace is a loaded workload: its runs (one, or its windows) and its largest request.
type matrixTrace struct {
	w         MatrixWorkload
	runs      [][]Request
	maxBlocks int
	spanMS    float64 // the runs' mean arrival span at speedup 1
}

// loadWorkload reads w's trace and splits it into windows when asked.
func loadWorkload(w MatrixWorkload) (*matrixTrace, error) {
	reqs, err := LoadTrace(w.Trace, w.Requests)
	if err != nil {
		return nil, fmt.Errorf("matrix: workload %s: %w", w.Name, err)
	}
	t := &matrixTrace{w: w, runs: [][]Request{reqs}}
	if w.Windows > 0 {
		if t.runs = Windows(reqs, w.Windows); len(t.runs) == 0 {
			return nil, fmt.Errorf("matrix: workload %s: %d requests make no window of %d", w.Name, len(reqs), w.Windows)
		}
	}
	for _, r := range reqs {
		t.maxBlocks = max(t.maxBlocks, blocksFor(r.Input+r.Output))
	}
	for _, run := range t.runs {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range run {
			lo, hi = min(lo, r.ArrivalMS), max(hi, r.ArrivalMS)
		}
		if len(run) > 0 {
			t.spanMS += (hi - lo) / float64(len(t.runs))
		}
	}
	return t, nil
}

// capacityBlocks is a capacity's per-worker blocks for a preset and a workload. For a mix of
// presets whose caches differ (fleet.Mix) the full capacity (Fraction 1) is 0 — every worker its
// own preset's, as Config.CapacityBlocks 0 and kvselect-sim --capacity-blocks 0 give it — when
// each holds the workload's headroom; any other fraction is of the smallest preset's
// (fleet.MixNumBlocks), the same for every worker.
func capacityBlocks(c MatrixCapacity, preset string, t *matrixTrace) (int, error) {
	mix, err := fleet.Mix(preset)
	if err != nil {
		return 0, err
	}
	floor := int(math.Ceil(MinHeadroom * float64(t.maxBlocks)))
	smallest := fleet.MixNumBlocks(mix, TraceBlockTokens)
	if c.Fraction == 1 && smallest >= floor && slices.ContainsFunc(mix, func(sp fleet.Spec) bool { return sp.NumBlocks(TraceBlockTokens) != smallest }) {
		return 0, nil
	}
	n := int(math.Round(c.Fraction * float64(smallest)))
	return max(n, floor, 1), nil
}

// config is the simulation configuration of group g at speedup s.
func (m *Matrix) config(g *MatrixGroup, s float64) Config {
	return Config{Workers: g.Workers, CapacityBlocks: g.CapacityBlocks, Speedup: s, Seed: g.Seed, Model: g.Preset, KVEventDelayMS: m.KVEventDelayMS, ScrapeIntervalMS: m.ScrapeIntervalMS}
}

// groupName is g's part of a cell ID: workload/capacity/wN/preset, and /seedN when the matrix
// runs several seeds.
func (m *Matrix) groupName(g *MatrixGroup) string {
	name := fmt.Sprintf("%s/%s/w%d/%s", g.Workload, g.Capacity, g.Workers, g.Preset)
	if len(m.Seeds) > 1 {
		name += fmt.Sprintf("/seed%d", g.Seed)
	}
	return name
}

// runStats runs policy on every run of t and aggregates the results.
func (m *Matrix) runStats(policy string, cfg Config, t *matrixTrace) (MatrixStats, error) {
	results := make([]Result, len(t.runs))
	for i, reqs := range t.runs {
		r, err := m.Run(policy, cfg, reqs)
		if err != nil {
			return MatrixStats{}, fmt.Errorf("matrix: %s on %s: %w", policy, t.w.Name, err)
		}
		results[i] = r
	}
	return aggregateStats(results, t.runs), nil
}

// aggregateStats combines the results of a workload's runs (see MatrixStats).
func aggregateStats(results []Result, runs [][]Request) MatrixStats {
	if len(results) == 1 {
		r := results[0]
		return MatrixStats{MeanMS: r.TTFTMean, P50MS: r.TTFTP50, P99MS: r.TTFTP99, HitRate: r.HitRate, LoadCV: r.LoadCV, Rejected: r.Rejected, Preemptions: r.Preemptions}
	}
	var s MatrixStats
	var logMean, logP50, logP99, hitTok, totalTok float64
	for i, r := range results {
		logMean += math.Log(max(r.TTFTMean, 1e-3))
		logP50 += math.Log(max(r.TTFTP50, 1e-3))
		logP99 += math.Log(max(r.TTFTP99, 1e-3))
		tokens := 0.0
		for _, q := range runs[i] {
			tokens += float64(q.Input)
		}
		hitTok += r.HitRate * tokens
		totalTok += tokens
		s.LoadCV += r.LoadCV
		s.Rejected += r.Rejected
		s.Preemptions += r.Preemptions
	}
	n := float64(len(results))
	s.MeanMS, s.P50MS, s.P99MS = math.Exp(logMean/n), math.Exp(logP50/n), math.Exp(logP99/n)
	s.LoadCV /= n
	if totalTok > 0 {
		s.HitRate = hitTok / totalTok
	}
	return s
}

// parallel runs f(0..n-1) on up to workers goroutines and returns the first error.
func parallel(workers, n int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n)) // stop handing out work
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// RunMatrix runs the matrix: loads every workload, searches each group's loads, runs every
// policy in every cell in parallel, and checks each candidate against the bar. The report is
// the same for the same spec on any machine and at any parallelism.
func RunMatrix(spec Matrix) (*MatrixReport, error) {
	m, err := spec.Normalize()
	if err != nil {
		return nil, err
	}
	workers := m.Parallel
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	traces := make([]*matrixTrace, len(m.Workloads))
	if err := parallel(workers, len(traces), func(i int) (err error) {
		traces[i], err = loadWorkload(m.Workloads[i])
		return err
	}); err != nil {
		return nil, err
	}
	var groups []*MatrixGroup
	for _, t := range traces {
		for _, c := range m.Capacities {
			for _, n := range m.Workers {
				for _, p := range m.Presets {
					blocks, err := capacityBlocks(c, p, t)
					if err != nil {
						return nil, err
					}
					for _, seed := range m.Seeds {
						groups = append(groups, &MatrixGroup{Workload: t.w.Name, Capacity: c.Name, CapacityBlocks: blocks, Workers: n, Preset: presetName(p), Seed: seed, wl: t})
					}
				}
			}
		}
	}
	policies := append(append([]string(nil), m.Candidates...), m.Rivals...)
	searches := 0
	var mu sync.Mutex
	progress := func(phase string, total int) {
		if m.Progress != nil {
			mu.Lock()
			searches++
			m.Progress(phase, searches, total)
			mu.Unlock()
		}
	}
	// Phase 1: the load searches, one group per goroutine (each search is sequential). The
	// search measures round-robin, which draws nothing from the policy seed, so each group is
	// searched at the first seed and its loads shared by the same group at the others.
	seeds := len(m.Seeds)
	if err := parallel(workers, len(groups)/seeds, func(i int) error {
		g := groups[i*seeds]
		probe := &loadProbe{measure: func(s float64) (float64, error) {
			st, err := m.runStats("round-robin", m.config(g, s), g.wl)
			return st.P99MS, err
		}}
		loads, idle, missing, err := findLoads(probe, m.Targets, m.OverloadFactor, m.SearchTolerance)
		g.Loads, g.IdleP99MS, g.Missing, g.SearchRuns = loads, idle, missing, probe.runs
		for _, o := range groups[i*seeds+1 : (i+1)*seeds] {
			o.Loads, o.IdleP99MS, o.Missing = slices.Clone(loads), idle, missing
		}
		progress("load searches", len(groups)/seeds)
		return err
	}); err != nil {
		return nil, err
	}
	// Phase 2: every policy in every cell, one simulation per job.
	var cells []*MatrixCell
	var cellGroup []*MatrixGroup
	for _, g := range groups {
		for _, l := range g.Loads {
			l.SpanS = g.wl.spanMS / l.Speedup / 1000
			cells = append(cells, &MatrixCell{
				ID:       m.groupName(g) + "/" + l.Name,
				Workload: g.Workload, Trace: g.wl.w.Trace, Requests: g.wl.w.Requests, Windows: g.wl.w.Windows,
				Capacity: g.Capacity, CapacityBlocks: g.CapacityBlocks, Workers: g.Workers, Preset: g.Preset, Seed: g.Seed, Load: l,
				Stats: map[string]MatrixStats{},
			})
			cellGroup = append(cellGroup, g)
		}
	}
	stats := make([]MatrixStats, len(cells)*len(policies))
	searches = 0
	if err := parallel(workers, len(stats), func(j int) error {
		c, g, p := cells[j/len(policies)], cellGroup[j/len(policies)], policies[j%len(policies)]
		st, err := m.runStats(p, m.config(g, c.Load.Speedup), g.wl)
		stats[j] = st
		progress("cell simulations", len(stats))
		return err
	}); err != nil {
		return nil, err
	}
	rep := &MatrixReport{Spec: m}
	for i, c := range cells {
		for k, p := range policies {
			c.Stats[p] = stats[i*len(policies)+k]
		}
		for _, cand := range m.Candidates {
			c.Verdicts = append(c.Verdicts, m.verdict(c, cand))
		}
		rep.Cells = append(rep.Cells, *c)
	}
	for _, g := range groups {
		rep.Groups = append(rep.Groups, *g)
	}
	rep.summarize()
	return rep, nil
}

// presetName resolves "" to the default preset's name.
func presetName(p string) string {
	if p == "" {
		return fleet.DefaultPreset
	}
	return p
}
