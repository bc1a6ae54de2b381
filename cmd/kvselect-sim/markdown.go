package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/kvselect/kvselect/integration/sim"
)

// defaultPolicy is the policy --markdown compares with the others.
const defaultPolicy = "kvselect"

// printMarkdown prints one row per policy and, when the default policy ran beside others, its
// TTFT ratios to the best other policy and to the best policy that is not a kvselect variant.
func printMarkdown(w io.Writer, results []sim.Result) {
	fmt.Fprintln(w, "| policy | hit rate | TTFT mean ms | p50 ms | p99 ms | load CV | preempted | rejected |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	var def *sim.Result
	for i := range results {
		r := &results[i]
		fmt.Fprintf(w, "| %s | %.1f%% | %.0f | %.0f | %.0f | %.3f | %d | %d |\n", r.Policy, 100*r.HitRate, r.TTFTMean, r.TTFTP50, r.TTFTP99, r.LoadCV, r.Preemptions, r.Rejected)
		if r.Policy == defaultPolicy {
			def = r
		}
	}
	if def == nil {
		return
	}
	for _, set := range []struct {
		label   string
		exclude func(string) bool
	}{
		{"best other", func(p string) bool { return p == defaultPolicy }},
		{"best baseline (not kvselect-*)", func(p string) bool { return strings.HasPrefix(p, defaultPolicy) }},
	} {
		line := ""
		for _, m := range []struct {
			name string
			get  func(*sim.Result) float64
		}{
			{"mean", func(r *sim.Result) float64 { return r.TTFTMean }},
			{"p99", func(r *sim.Result) float64 { return r.TTFTP99 }},
			{"p50", func(r *sim.Result) float64 { return r.TTFTP50 }},
		} {
			best := -1
			for i := range results {
				if !set.exclude(results[i].Policy) && (best < 0 || m.get(&results[i]) < m.get(&results[best])) {
					best = i
				}
			}
			if best < 0 {
				return
			}
			line += fmt.Sprintf(" %s ×%.2f (%s);", m.name, m.get(def)/max(m.get(&results[best]), 1e-9), results[best].Policy)
		}
		fmt.Fprintf(w, "\n%s ÷ %s:%s\n", defaultPolicy, set.label, line[:len(line)-1])
	}
}

// printWindowsMarkdown prints CompareWindows' summaries as a markdown table.
func printWindowsMarkdown(w io.Writer, sums []sim.WindowSummary) {
	if len(sums) == 0 {
		return
	}
	fmt.Fprintf(w, "| policy | hit rate | p50 ÷ %[1]s | p99 ÷ %[1]s | mean ÷ %[1]s | p99 not worse | rejected |\n", sums[0].Baseline)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, s := range sums {
		fmt.Fprintf(w, "| %s | %.1f%% | %.3f | %.3f | %.3f | %d of %d | %d |\n", s.Policy, 100*s.HitRate, s.P50Ratio, s.P99Ratio, s.MeanRatio, s.P99NotWorse, s.Windows, s.Rejected)
	}
}
