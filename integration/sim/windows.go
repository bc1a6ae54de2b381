package sim

import (
	"fmt"
	"math"
)

// Windows splits reqs into consecutive windows of n requests, dropping a last window shorter
// than n. Each window is a copy whose arrivals are shifted to start at 0 (block ids are shared
// with reqs, which must not change while the windows are in use).
//
// A whole-trace replay's TTFT tail under overload is often set by one burst: at eight times the
// Azure code trace's rate, every request above its p99 arrived within the same second, so the
// p99 of two policies can swap with a slight change in how that burst is packed. Replaying the
// windows separately (CompareWindows) gives one tail per window and shows whether an ordering
// holds across bursts or only for one of them.
func Windows(reqs []Request, n int) [][]Request {
	if n < 1 {
		return nil
	}
	var out [][]Request
	for off := 0; off+n <= len(reqs); off += n {
		w := make([]Request, n)
		copy(w, reqs[off:off+n])
		base := w[0].ArrivalMS
		for i := range w {
			w[i].ArrivalMS -= base
		}
		out = append(out, w)
	}
	return out
}

// WindowSummary is one policy's results over trace windows, against a baseline policy run on
// the same windows. Ratios are geometric means over the windows of policy ÷ baseline (below 1 is
// better); a window where both are 0 counts as 1.
type WindowSummary struct {
	Policy   string `json:"policy"`
	Baseline string `json:"baseline"`
	Windows  int    `json:"windows"`
	Requests int    `json:"requests"` // per window
	// HitRate is the windows' hit rates weighted by their prompt tokens (a window's rate covers
	// its admitted requests only, as Result.HitRate does).
	HitRate   float64 `json:"hit_rate"`
	P50Ratio  float64 `json:"ttft_p50_ratio"`
	P99Ratio  float64 `json:"ttft_p99_ratio"`
	MeanRatio float64 `json:"ttft_mean_ratio"`
	// P99NotWorse counts the windows where the policy's p99 is at most the baseline's.
	P99NotWorse int `json:"p99_not_worse"`
	Rejected    int `json:"rejected"`
}

// CompareWindows runs baseline and each policy on every window with cfg.
func CompareWindows(cfg Config, windows [][]Request, policies []string, baseline string) ([]WindowSummary, error) {
	if len(windows) == 0 {
		return nil, fmt.Errorf("sim: no windows (the trace is shorter than one window)")
	}
	base := make([]Result, len(windows))
	for i, w := range windows {
		r, err := RunPolicy(baseline, cfg, w)
		if err != nil {
			return nil, err
		}
		base[i] = r
	}
	out := make([]WindowSummary, 0, len(policies))
	for _, name := range policies {
		s := WindowSummary{Policy: name, Baseline: baseline, Windows: len(windows), Requests: len(windows[0])}
		var logP50, logP99, logMean, hitTok, totalTok float64
		for i, w := range windows {
			r, err := RunPolicy(name, cfg, w)
			if err != nil {
				return nil, err
			}
			b := &base[i]
			logP50 += logRatio(r.TTFTP50, b.TTFTP50)
			logP99 += logRatio(r.TTFTP99, b.TTFTP99)
			logMean += logRatio(r.TTFTMean, b.TTFTMean)
			if r.TTFTP99 <= b.TTFTP99 {
				s.P99NotWorse++
			}
			s.Rejected += r.Rejected
			tokens := 0.0
			for _, q := range w {
				tokens += float64(q.Input)
			}
			hitTok += r.HitRate * tokens
			totalTok += tokens
		}
		n := float64(len(windows))
		s.P50Ratio, s.P99Ratio, s.MeanRatio = math.Exp(logP50/n), math.Exp(logP99/n), math.Exp(logMean/n)
		if totalTok > 0 {
			s.HitRate = hitTok / totalTok
		}
		out = append(out, s)
	}
	return out, nil
}

// logRatio is ln(a/b), 0 when both are 0; a zero against a positive value is clamped to a
// microsecond so that one idle window cannot make the mean infinite.
func logRatio(a, b float64) float64 {
	if a == b {
		return 0
	}
	return math.Log(max(a, 1e-3) / max(b, 1e-3))
}
