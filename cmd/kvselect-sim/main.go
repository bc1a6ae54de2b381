// Command kvselect-sim replays a request trace (Mooncake JSONL or Azure 2023 CSV) through
// simulated workers under several routing policies and reports hit rate, TTFT and balance.
//
//	go run ./cmd/kvselect-sim --trace ../shared/traces/mooncake_conversation_trace.jsonl \
//	    --workers 8 --model h100-8b --speedup 4
//
// --model picks the engine model (integration/fleet): h100-8b (default) and h100x8-70b are
// vLLM-style engines; legacy is the old one-prefill-at-a-time model that reproduces the old
// tables. Presets joined by "+" make a mixed fleet (worker i runs the (i mod k)-th), e.g.
// --model h100-8b+a100-8b: four H100 and four A100 workers of eight.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kvselect/kvselect/integration/fleet"
	"github.com/kvselect/kvselect/integration/sim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // --help printed the usage: success
		}
		fmt.Fprintln(os.Stderr, "kvselect-sim:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kvselect-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	trace := fs.String("trace", "", "trace file: Mooncake .jsonl or Azure 2023 .csv (required)")
	workers := fs.Int("workers", 8, "number of simulated workers")
	capacity := fs.Int("capacity-blocks", 0, "per-worker KV cache capacity in 512-token blocks (0: the model's)")
	model := fs.String("model", fleet.DefaultPreset, "engine model, or several joined by + for a mixed fleet (worker i runs the (i mod k)-th): "+modelHelp())
	delay := fs.Duration("kv-event-delay", sim.DefaultKVEventDelayMS*time.Millisecond, "delay between a worker's KV event and the router learning it")
	requests := fs.Int("requests", 0, "replay only the first N requests (0 = all)")
	speedup := fs.Float64("speedup", 1, "arrival-rate multiplier")
	policies := fs.String("policies", strings.Join(sim.PolicyNames, ","), "comma-separated policies")
	seed := fs.Uint64("seed", 42, "random seed")
	asJSON := fs.Bool("json", false, "print one JSON object per policy instead of a table")
	asMD := fs.Bool("markdown", false, "print a markdown table with kvselect's ratios to the best other policy")
	windows := fs.Int("windows", 0, "replay consecutive windows of N requests separately and compare each policy with --baseline")
	baseline := fs.String("baseline", "least-loaded", "the policy --windows compares against")
	scrape := fs.Duration("scrape-interval", sim.DefaultScrapeIntervalMS*time.Millisecond, "how often the router scrapes worker metrics (running, waiting, KV usage) for policies that read them; 0 reads them live")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *trace == "" {
		return fmt.Errorf("--trace is required")
	}
	if *delay < 0 || *scrape < 0 {
		return fmt.Errorf("--kv-event-delay and --scrape-interval must not be negative")
	}
	if *capacity < 0 {
		return fmt.Errorf("--capacity-blocks must not be negative")
	}
	mix, err := fleet.Mix(*model)
	if err != nil {
		return err
	}
	if *windows < 0 {
		return fmt.Errorf("--windows must be positive")
	}
	baselineSet := false
	fs.Visit(func(f *flag.Flag) { baselineSet = baselineSet || f.Name == "baseline" })
	if baselineSet && *windows == 0 {
		return fmt.Errorf("--baseline needs --windows")
	}
	reqs, err := sim.LoadTrace(*trace, *requests)
	if err != nil {
		return err
	}
	if *capacity == 0 && len(mix) == 1 {
		*capacity = mix[0].NumBlocks(sim.TraceBlockTokens)
	}
	cfg := sim.Config{Workers: *workers, CapacityBlocks: *capacity, Speedup: *speedup, Seed: *seed, Model: *model,
		KVEventDelayMS: float64(*delay) / float64(time.Millisecond), ScrapeIntervalMS: float64(*scrape) / float64(time.Millisecond)}
	if *windows > 0 {
		return runWindows(cfg, sim.Windows(reqs, *windows), splitList(*policies), *baseline, *asJSON, *asMD, stdout)
	}
	var results []sim.Result
	for _, name := range splitList(*policies) {
		start := time.Now()
		res, err := sim.RunPolicy(name, cfg, reqs)
		if err != nil {
			return err
		}
		if *asJSON {
			b, _ := json.Marshal(res)
			fmt.Fprintln(stdout, string(b))
		} else if !*asMD {
			fmt.Fprintf(stderr, "%s: %d requests in %v\n", res.Policy, res.Requests, time.Since(start).Round(time.Millisecond))
		}
		results = append(results, res)
	}
	if *asMD && !*asJSON {
		printMarkdown(stdout, results)
		return nil
	}
	if !*asJSON {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "policy\thit rate\tavailable\tTTFT p50 ms\tTTFT p99 ms\tp99.9 ms\tmax ms\tTTFT mean ms\tload CV\tqueued\tpreempted\trejected\t\n")
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t%.1f%%\t%.1f%%\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.3f\t%d\t%d\t%d\t\n", r.Policy, 100*r.HitRate, 100*r.AvailHit,
				r.TTFTP50, r.TTFTP99, r.TTFTP999, r.TTFTMax, r.TTFTMean, r.LoadCV, r.Queued, r.Preemptions, r.Rejected)
		}
		tw.Flush()
		if len(results) > 0 {
			fmt.Fprintf(stdout, "available = hit rate if every prefill had used the longest prefix cached on any worker\n")
			capText := fmt.Sprintf("%d blocks", *capacity)
			if *capacity == 0 {
				capText = "each preset's"
			}
			fmt.Fprintf(stdout, "ideal hit rate: %.1f%% with one cache of the fleet's %d blocks, %.1f%% with an infinite one; model %s, workers %d, capacity %s, speedup %g, kv-event delay %v\n",
				100*results[0].IdealHitAtCapacity, results[0].FleetBlocks, 100*results[0].IdealHit, results[0].Model, *workers, capText, *speedup, *delay)
		}
	}
	return nil
}

// runWindows prints, for each policy, how it compares with baseline over the windows.
func runWindows(cfg sim.Config, windows [][]sim.Request, policies []string, baseline string, asJSON, asMD bool, stdout io.Writer) error {
	sums, err := sim.CompareWindows(cfg, windows, policies, baseline)
	if err != nil {
		return err
	}
	if asJSON {
		for _, s := range sums {
			b, _ := json.Marshal(s)
			fmt.Fprintln(stdout, string(b))
		}
		return nil
	}
	if asMD {
		printWindowsMarkdown(stdout, sums)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "policy\thit rate\tp50 ratio\tp99 ratio\tmean ratio\tp99 not worse\trejected\t\n")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%.1f%%\t%.3f\t%.3f\t%.3f\t%d of %d\t%d\t\n", s.Policy, 100*s.HitRate, s.P50Ratio, s.P99Ratio, s.MeanRatio, s.P99NotWorse, s.Windows, s.Rejected)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "ratios: geometric mean over %d windows of %d requests of the policy's TTFT ÷ %s's (below 1 is better); caches start cold in every window; model %s, speedup %g\n",
		len(windows), len(windows[0]), baseline, cfg.Model, cfg.Speedup)
	return nil
}

// splitList splits a list of names separated by commas or spaces.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

// modelHelp lists the engine presets for --help.
func modelHelp() string {
	var parts []string
	for _, p := range slices.Concat(fleet.Presets(), fleet.IndependentPresets(), fleet.VariantPresets()) {
		parts = append(parts, p.Name+" ("+p.About+")")
	}
	return strings.Join(parts, "; ")
}
