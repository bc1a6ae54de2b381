package sim

import (
	"fmt"
	"math"
	"slices"
)

// MatrixVerdict is one candidate's standing in a cell: its TTFT over the best rival's, per
// metric (the best rival may differ per metric), beside its hit rate and load balance.
type MatrixVerdict struct {
	Candidate string  `json:"candidate"`
	MeanRatio float64 `json:"mean_ratio"`
	P50Ratio  float64 `json:"p50_ratio"`
	P99Ratio  float64 `json:"p99_ratio"`
	BestMean  string  `json:"best_mean"` // the rival with the lowest mean TTFT
	BestP50   string  `json:"best_p50"`
	BestP99   string  `json:"best_p99"`
	HitRate   float64 `json:"hit_rate"`
	// BestHitRate is the highest hit rate of any rival, BestHit that rival.
	BestHitRate float64 `json:"best_hit_rate"`
	BestHit     string  `json:"best_hit"`
	LoadCV      float64 `json:"load_cv"`
	// BestMeanLoadCV is the load CV of the rival with the lowest mean TTFT.
	BestMeanLoadCV float64 `json:"best_mean_load_cv"`
	Pass           bool    `json:"pass"`
	// Failures says which parts of the bar failed, e.g. "mean 1.31× > 1.25× (sglang)".
	Failures []string `json:"failures,omitempty"`
	// Repro is the kvselect-sim command that reproduces the candidate and the rivals it
	// is measured against in this cell.
	Repro string `json:"repro"`
}

// ratio is a ÷ b with both clamped to a microsecond, so that an idle cell cannot divide by 0.
func ratio(a, b float64) float64 { return max(a, 1e-3) / max(b, 1e-3) }

// bestRival returns the rival with the lowest metric (ties: the first in the rivals' order).
func bestRival(stats map[string]MatrixStats, rivals []string, metric func(MatrixStats) float64) (string, float64) {
	best, bestV := "", math.Inf(1)
	for _, r := range rivals {
		if st, ok := stats[r]; ok && metric(st) < bestV {
			best, bestV = r, metric(st)
		}
	}
	return best, bestV
}

// verdict checks candidate cand in cell c against the bar.
func (m *Matrix) verdict(c *MatrixCell, cand string) MatrixVerdict {
	st := c.Stats[cand]
	v := MatrixVerdict{Candidate: cand, HitRate: st.HitRate, LoadCV: st.LoadCV}
	var bestMean, bestP50, bestP99 float64
	v.BestMean, bestMean = bestRival(c.Stats, m.Rivals, func(s MatrixStats) float64 { return s.MeanMS })
	v.BestP50, bestP50 = bestRival(c.Stats, m.Rivals, func(s MatrixStats) float64 { return s.P50MS })
	v.BestP99, bestP99 = bestRival(c.Stats, m.Rivals, func(s MatrixStats) float64 { return s.P99MS })
	v.BestHit, _ = bestRival(c.Stats, m.Rivals, func(s MatrixStats) float64 { return -s.HitRate })
	v.BestHitRate = c.Stats[v.BestHit].HitRate
	v.BestMeanLoadCV = c.Stats[v.BestMean].LoadCV
	v.MeanRatio, v.P50Ratio, v.P99Ratio = ratio(st.MeanMS, bestMean), ratio(st.P50MS, bestP50), ratio(st.P99MS, bestP99)
	v.Failures = m.Bar.failures(v, c.Load.Strict)
	if rej := c.Stats[v.BestMean].Rejected; st.Rejected > rej {
		// A policy that drops requests looks faster than it is.
		v.Failures = append(v.Failures, fmt.Sprintf("rejects %d requests (%s: %d)", st.Rejected, v.BestMean, rej))
	}
	v.Pass = len(v.Failures) == 0
	v.Repro = reproCommand(c, m, cand, v)
	return v
}

// failures lists the parts of the bar v misses; strict applies the "seconds" loads' bar.
func (b Bar) failures(v MatrixVerdict, strict bool) []string {
	var out []string
	check := func(name string, r, limit float64, rival string) {
		if r > limit {
			out = append(out, fmt.Sprintf("%s %.2f× > %.2f× (%s)", name, r, limit, rival))
		}
	}
	if strict {
		check("mean", v.MeanRatio, min(b.StrictMean, b.Mean), v.BestMean)
		check("p50", v.P50Ratio, b.StrictP50, v.BestP50)
		check("p99", v.P99Ratio, b.StrictP99, v.BestP99)
	} else {
		check("mean", v.MeanRatio, b.Mean, v.BestMean)
	}
	return out
}

// MatrixFailure is one failing (candidate, cell).
type MatrixFailure struct {
	Candidate string   `json:"candidate"`
	Cell      string   `json:"cell"`
	Failures  []string `json:"failures"`
	Repro     string   `json:"repro"`
}

// MatrixSummary is one candidate's totals over the matrix.
type MatrixSummary struct {
	Candidate string `json:"candidate"`
	MatrixTally
	// PerSeed is the same over each seed's cells, in Matrix.Seeds order; empty when the matrix
	// runs one seed (the totals are that seed's).
	PerSeed []MatrixSeedTally `json:"per_seed,omitempty"`
}

// MatrixSeedTally is a candidate's totals over one seed's cells.
type MatrixSeedTally struct {
	Seed uint64 `json:"seed"`
	MatrixTally
}

// MatrixTally is a candidate's totals over a set of cells.
type MatrixTally struct {
	Cells  int `json:"cells"`
	Passed int `json:"passed"`
	// AboveBound counts the cells whose mean ratio exceeds the bar's everywhere bound (1.25×).
	AboveBound int `json:"above_bound"`
	// Worst ratios over the cells and where they occur (cell ids).
	WorstMean     float64 `json:"worst_mean_ratio"`
	WorstMeanCell string  `json:"worst_mean_cell"`
	WorstP99      float64 `json:"worst_p99_ratio"`
	WorstP99Cell  string  `json:"worst_p99_cell"`
	WorstP50      float64 `json:"worst_p50_ratio"`
	WorstP50Cell  string  `json:"worst_p50_cell"`
	// GeoMean ratios over the cells.
	GeoMeanMean float64 `json:"geomean_mean_ratio"`
	GeoMeanP50  float64 `json:"geomean_p50_ratio"`
	GeoMeanP99  float64 `json:"geomean_p99_ratio"`

	logMean, logP50, logP99 float64
}

// add counts verdict v of cell id; bound is the bar's everywhere bound.
func (t *MatrixTally) add(id string, v MatrixVerdict, bound float64) {
	t.Cells++
	if v.Pass {
		t.Passed++
	}
	if v.MeanRatio > bound {
		t.AboveBound++
	}
	t.logMean += math.Log(v.MeanRatio)
	t.logP50 += math.Log(v.P50Ratio)
	t.logP99 += math.Log(v.P99Ratio)
	if v.MeanRatio > t.WorstMean {
		t.WorstMean, t.WorstMeanCell = v.MeanRatio, id
	}
	if v.P99Ratio > t.WorstP99 {
		t.WorstP99, t.WorstP99Cell = v.P99Ratio, id
	}
	if v.P50Ratio > t.WorstP50 {
		t.WorstP50, t.WorstP50Cell = v.P50Ratio, id
	}
	n := float64(t.Cells)
	t.GeoMeanMean, t.GeoMeanP50, t.GeoMeanP99 = math.Exp(t.logMean/n), math.Exp(t.logP50/n), math.Exp(t.logP99/n)
}

// MatrixReport is a finished matrix.
type MatrixReport struct {
	Spec     Matrix          `json:"spec"`
	Groups   []MatrixGroup   `json:"groups"`
	Cells    []MatrixCell    `json:"cells"`
	Summary  []MatrixSummary `json:"summary"`
	Failures []MatrixFailure `json:"failures"`
}

// Pass reports whether every candidate passed every cell (and at least one cell ran).
func (r *MatrixReport) Pass() bool { return len(r.Cells) > 0 && len(r.Failures) == 0 }

// summarize fills Summary and Failures from Cells, in the cells' order.
func (r *MatrixReport) summarize() {
	r.Summary, r.Failures = nil, nil
	for _, cand := range r.Spec.Candidates {
		s := MatrixSummary{Candidate: cand}
		if len(r.Spec.Seeds) > 1 {
			for _, seed := range r.Spec.Seeds {
				s.PerSeed = append(s.PerSeed, MatrixSeedTally{Seed: seed})
			}
		}
		for _, c := range r.Cells {
			i := slices.IndexFunc(c.Verdicts, func(v MatrixVerdict) bool { return v.Candidate == cand })
			if i < 0 {
				continue
			}
			v := c.Verdicts[i]
			if !v.Pass {
				r.Failures = append(r.Failures, MatrixFailure{Candidate: cand, Cell: c.ID, Failures: v.Failures, Repro: v.Repro})
			}
			s.add(c.ID, v, r.Spec.Bar.Mean)
			if k := slices.IndexFunc(s.PerSeed, func(p MatrixSeedTally) bool { return p.Seed == c.Seed }); k >= 0 {
				s.PerSeed[k].add(c.ID, v, r.Spec.Bar.Mean)
			}
		}
		r.Summary = append(r.Summary, s)
	}
}
