package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// shellQuote quotes s for a POSIX shell when it holds anything but safe characters (synth:
// specs hold ? and &).
func shellQuote(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:,=+@", r))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// reproCommand is the kvselect-sim command that replays cell c for candidate cand and the
// rivals v is measured against (and round-robin, whose p99 defines the load). For a windowed
// workload it compares against the rival of the first failure (or of the mean) over the same
// windows, whose ratios are the matrix's.
func reproCommand(c *MatrixCell, m *Matrix, cand string, v MatrixVerdict) string {
	policies := []string{cand}
	for _, p := range []string{v.BestMean, v.BestP50, v.BestP99, "round-robin"} {
		if p != "" && !slices.Contains(policies, p) {
			policies = append(policies, p)
		}
	}
	args := []string{"kvselect-sim", "--trace", shellQuote(c.Trace)}
	if c.Requests > 0 {
		args = append(args, "--requests", strconv.Itoa(c.Requests))
	}
	args = append(args,
		"--workers", strconv.Itoa(c.Workers),
		"--capacity-blocks", strconv.Itoa(c.CapacityBlocks),
		"--model", c.Preset,
		"--speedup", strconv.FormatFloat(c.Load.Speedup, 'g', -1, 64),
		"--seed", strconv.FormatUint(c.Seed, 10),
		"--kv-event-delay", time.Duration(m.KVEventDelayMS*float64(time.Millisecond)).String(),
		"--scrape-interval", time.Duration(m.ScrapeIntervalMS*float64(time.Millisecond)).String(),
		"--policies", strings.Join(policies, ","))
	if c.Windows > 0 {
		baseline := v.BestMean
		switch {
		case len(v.Failures) > 0 && strings.HasPrefix(v.Failures[0], "p50"):
			baseline = v.BestP50
		case len(v.Failures) > 0 && strings.HasPrefix(v.Failures[0], "p99"):
			baseline = v.BestP99
		}
		args = append(args, "--windows", strconv.Itoa(c.Windows), "--baseline", baseline)
	}
	return strings.Join(args, " ")
}

// WriteJSON writes the report as one indented JSON document.
func (r *MatrixReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes, per candidate, a summary, one table row per cell and the failing
// cells with their reproduction commands.
func (r *MatrixReport) WriteMarkdown(w io.Writer) error {
	b := r.Spec.Bar
	var sb strings.Builder
	fmt.Fprintf(&sb, "Bar: at the \"seconds\" loads (round-robin's TTFT p99 ≥ its idle p99 + %s) mean ≤ %.2f×, p99 ≤ %.2f×, p50 ≤ %.2f× the best rival per metric; mean ≤ %.2f× everywhere. Rivals: %s. %s, KV-event delay %s, metrics scraped every %s.\n\n",
		targetList(r.Spec.Targets), b.StrictMean, b.StrictP99, b.StrictP50, b.Mean, strings.Join(r.Spec.Rivals, ", "), seedList(r.Spec.Seeds),
		time.Duration(r.Spec.KVEventDelayMS*float64(time.Millisecond)), time.Duration(r.Spec.ScrapeIntervalMS*float64(time.Millisecond)))
	for _, s := range r.Summary {
		fmt.Fprintf(&sb, "## %s: %d of %d cells pass\n\n", s.Candidate, s.Passed, s.Cells)
		if s.Cells > 0 {
			fmt.Fprintf(&sb, "Geometric means of the ratios: mean %.3f×, p50 %.3f×, p99 %.3f×. Cells with mean above %.2f×: %d. Worst: mean %.2f× (%s), p50 %.2f× (%s), p99 %.2f× (%s).\n\n",
				s.GeoMeanMean, s.GeoMeanP50, s.GeoMeanP99, b.Mean, s.AboveBound, s.WorstMean, s.WorstMeanCell, s.WorstP50, s.WorstP50Cell, s.WorstP99, s.WorstP99Cell)
		}
		if len(s.PerSeed) > 0 {
			sb.WriteString("| seed | cells | passed | mean above the bound | geometric means mean / p50 / p99 | worst mean |\n|---:|---:|---:|---:|---|---:|\n")
			for _, p := range s.PerSeed {
				fmt.Fprintf(&sb, "| %d | %d | %d | %d | %.3f / %.3f / %.3f | %.2f× |\n", p.Seed, p.Cells, p.Passed, p.AboveBound, p.GeoMeanMean, p.GeoMeanP50, p.GeoMeanP99, p.WorstMean)
			}
			sb.WriteString("\n")
		}
		fmt.Fprintf(&sb, "| cell | speedup | arrivals s | RR p99 s | mean × | p50 × | p99 × | hit %% (%s / best rival) | load CV (%s / best-mean rival) | verdict |\n", s.Candidate, s.Candidate)
		sb.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
		for _, c := range r.Cells {
			i := slices.IndexFunc(c.Verdicts, func(v MatrixVerdict) bool { return v.Candidate == s.Candidate })
			if i < 0 {
				continue
			}
			v := c.Verdicts[i]
			verdict := "pass"
			if !v.Pass {
				verdict = "**FAIL**: " + strings.Join(v.Failures, "; ")
			}
			fmt.Fprintf(&sb, "| %s | %g | %.0f | %.1f | %s | %s | %s | %.1f / %.1f (%s) | %.2f / %.2f (%s) | %s |\n",
				c.ID, c.Load.Speedup, c.Load.SpanS, c.Load.RoundRobinP99MS/1000,
				ratioCell(v.MeanRatio, v.BestMean), ratioCell(v.P50Ratio, v.BestP50), ratioCell(v.P99Ratio, v.BestP99),
				100*v.HitRate, 100*v.BestHitRate, v.BestHit, v.LoadCV, v.BestMeanLoadCV, v.BestMean, verdict)
		}
		sb.WriteString("\n")
	}
	var missing []string
	for _, g := range r.Groups {
		if len(g.Missing) > 0 {
			missing = append(missing, fmt.Sprintf("%s: %s", r.Spec.groupName(&g), strings.Join(g.Missing, ", ")))
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(&sb, "Loads round-robin never reached below speedup %g (no cell): %s.\n\n", float64(searchMaxSpeedup), strings.Join(missing, "; "))
	}
	if len(r.Failures) == 0 {
		sb.WriteString("No failing cells.\n")
	} else {
		fmt.Fprintf(&sb, "## Failing cells (%d)\n\n", len(r.Failures))
		for _, f := range r.Failures {
			fmt.Fprintf(&sb, "- %s `%s`: %s\n\n  ```\n  %s\n  ```\n", f.Candidate, f.Cell, strings.Join(f.Failures, "; "), f.Repro)
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// ratioCell prints a ratio and the rival it is against.
func ratioCell(r float64, rival string) string { return fmt.Sprintf("%.2f (%s)", r, rival) }

// seedList prints the policy seeds: "Seed 42" or "Seeds 42, 7".
func seedList(seeds []uint64) string {
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = strconv.FormatUint(s, 10)
	}
	if len(parts) == 1 {
		return "Seed " + parts[0]
	}
	return "Seeds " + strings.Join(parts, ", ")
}

// targetList prints the targets as seconds: "1s, 5s".
func targetList(ts []float64) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = formatSeconds(t)
	}
	return strings.Join(parts, ", ")
}
