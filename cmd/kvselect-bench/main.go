// Command kvselect-bench drives a kvselect HTTP endpoint with the EPP flow
// (/select_and_reserve → prefill_complete → DELETE) from K closed-loop keep-alive clients, with
// prompts from a Mooncake trace, and measures a trivial Go JSON handler on the same machine as
// the HTTP ceiling, so the result is a ratio rather than a machine-dependent number.
//
// Without --target it starts kvselect in process (64 workers, index preloaded from the trace
// to ≥ 1M (block, owner) entries).
//
//	go run ./cmd/kvselect-bench --trace ../shared/traces/mooncake_conversation_trace.jsonl --duration 10s
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kvselect/kvselect/integration/sim"
)

// result is the --json output.
type result struct {
	RPS           float64 `json:"rps"` // HTTP calls per second against kvselect
	SelectionsPS  float64 `json:"selections_per_s"`
	CeilingRPS    float64 `json:"ceiling_rps"` // HTTP calls per second against the trivial handler
	Ratio         float64 `json:"ratio"`
	P50MS         float64 `json:"p50_ms"` // select_and_reserve latency
	P99MS         float64 `json:"p99_ms"`
	P999MS        float64 `json:"p999_ms"`
	Workers       int     `json:"workers"`
	IndexedBlocks int     `json:"indexed_blocks"`
	Clients       int     `json:"clients"`
	Errors        int     `json:"errors"`
	DurationS     float64 `json:"duration_s"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) { // -h/--help printed the usage: not a failure
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "kvselect-bench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kvselect-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "", "base URL of a running kvselect (default: start one in process)")
	trace := fs.String("trace", "../shared/traces/mooncake_conversation_trace.jsonl", "Mooncake JSONL trace for prompts")
	clients := fs.Int("clients", 32, "concurrent keep-alive clients")
	duration := fs.Duration("duration", 10*time.Second, "measurement time per phase")
	warmup := fs.Duration("warmup", 2*time.Second, "warm-up time per phase")
	workers := fs.Int("workers", 64, "workers to register in the in-process service")
	replicas := fs.Int("replicas", 4, "owners each trace prefix is preloaded onto (in-process service)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	reqs, err := sim.LoadTrace(*trace, 0)
	if err != nil {
		return err
	}
	bodies := selectBodies(reqs)
	res := result{Clients: *clients}

	base := *target
	if base == "" {
		srv, err := startService(reqs, *workers, *replicas)
		if err != nil {
			return err
		}
		defer srv.close()
		base, res.Workers, res.IndexedBlocks = srv.url, *workers, srv.entries
	}
	ceil, err := startCeiling()
	if err != nil {
		return err
	}
	defer ceil.close()

	fmt.Fprintf(stderr, "kvselect at %s: %d clients, %v per phase\n", base, *clients, *duration)
	ours := drive(base, bodies, *clients, *warmup, *duration, true)
	fmt.Fprintf(stderr, "ceiling at %s\n", ceil.url)
	top := drive(ceil.url, bodies, *clients, *warmup, *duration, true)

	res.RPS, res.SelectionsPS, res.CeilingRPS = ours.callsPerSec, ours.loopsPerSec, top.callsPerSec
	if top.callsPerSec > 0 {
		res.Ratio = ours.callsPerSec / top.callsPerSec
	}
	res.P50MS, res.P99MS, res.P999MS = ours.p50, ours.p99, ours.p999
	res.Errors, res.DurationS = ours.errors, duration.Seconds()
	if *asJSON {
		b, _ := json.Marshal(res)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintf(stdout, "kvselect: %.0f HTTP calls/s (%.0f selections/s), select_and_reserve p50 %.3f ms p99 %.3f ms p999 %.3f ms, %d errors\n",
		res.RPS, res.SelectionsPS, res.P50MS, res.P99MS, res.P999MS, res.Errors)
	fmt.Fprintf(stdout, "ceiling (trivial JSON handler): %.0f calls/s; ratio %.2f\n", res.CeilingRPS, res.Ratio)
	if res.Workers > 0 {
		fmt.Fprintf(stdout, "in-process service: %d workers, %d indexed (block, owner) entries\n", res.Workers, res.IndexedBlocks)
	}
	return nil
}
