// Command kvselect-matrix runs the routing-quality robustness matrix (integration/sim,
// matrix*.go): workloads × capacities × fleet sizes × engine presets, each at the loads where
// round-robin's TTFT p99 first exceeds its idle value by 1 s and 5 s plus an overload point, every policy in every
// cell, and issue 13's bar for the candidate (kvselect's default) against the best rival. It
// prints a markdown table and every failing cell with the kvselect-sim command that
// reproduces it.
//
//	go run ./cmd/kvselect-matrix --quick                     # CI-size subset, ~1 min on one core
//	go run ./cmd/kvselect-matrix --presets h100-8b \
//	    --json matrix.json --markdown matrix.md              # the full matrix on one preset
//	go run ./cmd/kvselect-matrix --trace my_trace.jsonl --presets h100-8b,h100x8-70b \
//	    --capacities ample,tight                             # the matrix on your own trace
//	go run ./cmd/kvselect-matrix --quick --seeds 42,7        # every cell at two policy seeds
//
// Exit status: 0 when the matrix ran (whether or not cells fail), 3 with --check when any
// cell fails, 1 on an error; --help exits 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvselect/kvselect/integration/fleet"
	"github.com/kvselect/kvselect/integration/sim"
)

// errFailing is returned with --check when some cell misses the bar.
var errFailing = errors.New("cells fail the bar")

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errFailing):
		fmt.Fprintln(os.Stderr, "kvselect-matrix:", err)
		os.Exit(3)
	default:
		fmt.Fprintln(os.Stderr, "kvselect-matrix:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kvselect-matrix", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "run the CI-size subset (two short synthetic workloads, 8B preset, 8 workers, one load and the overload point)")
	traces := fs.String("traces", "", "directory of the shared traces (default $KVSELECT_TRACES, else ../shared/traces or ../../shared/traces)")
	presets := fs.String("presets", "", "comma-separated engine presets (default: all of "+strings.Join(fleet.PresetNames(), ", ")+"; --quick: h100-8b; also "+strings.Join(fleet.AllPresetNames()[len(fleet.PresetNames()):], ", ")+"; presets joined by + make a mixed fleet, e.g. h100-8b+a100-8b)")
	workloads := fs.String("workloads", "", "comma-separated workload names to keep (a name before its /sN keeps every seed); default all")
	capacities := fs.String("capacities", "", "comma-separated capacities to keep (ample, tight); default all")
	workers := fs.String("workers", "", "comma-separated fleet sizes (default 8,16; --quick: 8)")
	candidates := fs.String("candidates", "kvselect", "comma-separated policies under test")
	rivals := fs.String("rivals", strings.Join(sim.DefaultRivals(), ","), "comma-separated policies a candidate is compared with")
	targets := fs.String("targets", "", "round-robin TTFT p99s over its idle p99, in ms, that define the \"seconds\" loads (default 1000,5000; --quick: 1000)")
	overload := fs.Float64("overload", 2, "the overload point's speedup over the highest target's (≤ 0: none)")
	tol := fs.Float64("tolerance", 0.1, "relative precision of the load search")
	seed := fs.Uint64("seed", 42, "policy seed (synthetic workloads carry their own seeds)")
	seeds := fs.String("seeds", "", "comma-separated policy seeds, each cell run and judged once per seed (cell IDs gain /seedN); overrides --seed")
	delay := fs.Duration("kv-event-delay", sim.DefaultKVEventDelayMS*time.Millisecond, "delay between a worker's KV event and the router learning it")
	scrape := fs.Duration("scrape-interval", sim.DefaultScrapeIntervalMS*time.Millisecond, "how often the router scrapes worker metrics (running, waiting, KV usage); 0 reads them live")
	par := fs.Int("parallel", runtime.GOMAXPROCS(0), "simulations run at once")
	jsonOut := fs.String("json", "", "write the JSON report to this file (- for stdout)")
	mdOut := fs.String("markdown", "-", "write the markdown report to this file (- for stdout, empty for none)")
	check := fs.Bool("check", false, "exit with status 3 when any cell fails the bar")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	var own traceList
	fs.Var(&own, "trace", "run the matrix on this trace (a file or a synth: spec) instead of the built-in workloads; repeatable")
	requests := fs.Int("requests", 0, "with --trace: replay only the first N requests of each (0 = all)")
	windows := fs.Int("windows", 0, "with --trace: replay windows of N requests separately (0 = whole traces)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if *delay < 0 || *scrape < 0 || *par < 1 {
		return fmt.Errorf("--kv-event-delay and --scrape-interval must not be negative and --parallel must be ≥ 1")
	}
	if (*requests != 0 || *windows != 0) && len(own) == 0 {
		return fmt.Errorf("--requests and --windows apply to --trace workloads only")
	}
	if *requests < 0 || *windows < 0 {
		return fmt.Errorf("--requests and --windows must not be negative")
	}
	var m sim.Matrix
	switch {
	case len(own) > 0:
		m = sim.FullMatrix("", fleet.PresetNames()) // the full matrix's grid on these traces
		m.Workloads = nil
		for i, tr := range own {
			name := filepath.Base(tr)
			if strings.HasPrefix(tr, sim.SynthPrefix) {
				name = tr
			}
			m.Workloads = append(m.Workloads, sim.MatrixWorkload{Name: fmt.Sprintf("%d:%s", i+1, name), Trace: tr, Requests: *requests, Windows: *windows})
		}
	case *quick:
		m = sim.QuickMatrix()
	default:
		dir, err := traceDir(*traces)
		if err != nil {
			return err
		}
		m = sim.FullMatrix(dir, fleet.PresetNames())
	}
	var err error
	if *presets != "" {
		m.Presets = splitList(*presets)
		for _, p := range m.Presets {
			if _, err := fleet.Mix(p); err != nil {
				return err
			}
		}
	}
	if m.Workloads, err = keepWorkloads(m.Workloads, splitList(*workloads)); err != nil {
		return err
	}
	if *capacities != "" {
		keep := splitList(*capacities)
		var out []sim.MatrixCapacity
		for _, c := range m.Capacities {
			if slices.Contains(keep, c.Name) {
				out = append(out, c)
			}
		}
		if len(out) == 0 {
			return fmt.Errorf("--capacities %q keeps none of the matrix's capacities", *capacities)
		}
		m.Capacities = out
	}
	if *workers != "" {
		if m.Workers, err = intList(*workers); err != nil {
			return fmt.Errorf("--workers: %w", err)
		}
	}
	if *targets != "" {
		if m.Targets, err = floatList(*targets); err != nil {
			return fmt.Errorf("--targets: %w", err)
		}
	}
	m.Candidates, m.Rivals = splitList(*candidates), splitList(*rivals)
	m.OverloadFactor = *overload
	if *overload <= 0 {
		m.OverloadFactor = -1
	}
	m.SearchTolerance, m.Seed, m.Parallel = *tol, *seed, *par
	if *seeds != "" {
		ns, err := intList(*seeds)
		if err != nil {
			return fmt.Errorf("--seeds: %w", err)
		}
		m.Seeds = nil
		for _, n := range ns {
			m.Seeds = append(m.Seeds, uint64(n))
		}
	}
	m.KVEventDelayMS = float64(*delay) / float64(time.Millisecond)
	m.ScrapeIntervalMS = float64(*scrape) / float64(time.Millisecond)
	if err := checkPolicies(append(append([]string(nil), m.Candidates...), m.Rivals...)); err != nil {
		return err
	}
	if !*quiet {
		start, last := time.Now(), time.Time{}
		m.Progress = func(phase string, done, total int) {
			if now := time.Now(); done == total || now.Sub(last) > 5*time.Second {
				last = now
				fmt.Fprintf(stderr, "kvselect-matrix: %d of %d %s (%v)\n", done, total, phase, now.Sub(start).Round(time.Second))
			}
		}
	}
	rep, err := sim.RunMatrix(m)
	if err != nil {
		return err
	}
	if err := writeTo(*mdOut, stdout, rep.WriteMarkdown); err != nil {
		return err
	}
	if err := writeTo(*jsonOut, stdout, rep.WriteJSON); err != nil {
		return err
	}
	if *check && !rep.Pass() {
		return fmt.Errorf("%w: %d failing (candidate, cell) pairs", errFailing, len(rep.Failures))
	}
	return nil
}

// traceList is the repeatable --trace flag.
type traceList []string

func (t *traceList) String() string     { return strings.Join(*t, " ") }
func (t *traceList) Set(v string) error { *t = append(*t, v); return nil }

// writeTo writes with f to path ("-": stdout; "": nowhere).
func writeTo(path string, stdout io.Writer, f func(io.Writer) error) error {
	switch path {
	case "":
		return nil
	case "-":
		return f(stdout)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f(out); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// traceDir finds the shared traces: the flag, $KVSELECT_TRACES, or shared/traces beside the
// repository or beside the directory holding it (a git worktree).
func traceDir(flagDir string) (string, error) {
	dirs := []string{flagDir}
	if flagDir == "" {
		dirs = []string{os.Getenv("KVSELECT_TRACES"), filepath.Join("..", "shared", "traces"), filepath.Join("..", "..", "shared", "traces")}
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "mooncake_conversation_trace.jsonl")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("shared traces not found in %q: pass --traces DIR (or --quick, which needs none)", dirs)
}

// keepWorkloads keeps the workloads named in keep (all when keep is empty); "agentic" keeps
// agentic/s1 and agentic/s2 but not agentic-long/s1.
func keepWorkloads(ws []sim.MatrixWorkload, keep []string) ([]sim.MatrixWorkload, error) {
	if len(keep) == 0 {
		return ws, nil
	}
	var out []sim.MatrixWorkload
	for _, w := range ws {
		for _, k := range keep {
			if w.Name == k || strings.HasPrefix(w.Name, k+"/") {
				out = append(out, w)
				break
			}
		}
	}
	if len(out) == 0 {
		var names []string
		for _, w := range ws {
			names = append(names, w.Name)
		}
		return nil, fmt.Errorf("--workloads %v keeps none of %v", keep, names)
	}
	return out, nil
}

// checkPolicies rejects names RunPolicy does not know before any simulation runs.
func checkPolicies(names []string) error {
	for _, n := range names {
		if !slices.Contains(sim.PolicyNames, n) && n != "sglang-like" {
			return fmt.Errorf("unknown policy %q (known: %v)", n, sim.PolicyNames)
		}
	}
	return nil
}

// splitList splits a list of names separated by commas or spaces.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func floatList(s string) ([]float64, error) {
	var out []float64
	for _, f := range splitList(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}
