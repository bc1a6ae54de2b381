package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func trace(t *testing.T) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "traces", "mooncake_synthetic_trace.jsonl")
	if _, err := os.Stat(p); err != nil {
		p = filepath.Join("..", "..", "..", "..", "shared", "traces", "mooncake_synthetic_trace.jsonl") // a git worktree
		_, err = os.Stat(p)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("trace missing in CI: %v", err)
		}
		t.Skipf("trace not available: %v", err)
	}
	return p
}

// jsonLines runs the command and decodes every stdout line as one JSON object.
func jsonLines(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(args, &out, &errb); err != nil {
		t.Fatalf("run %v: %v (stderr %s)", args, err, errb.String())
	}
	var objs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var o map[string]any
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		objs = append(objs, o)
	}
	return objs
}

func TestJSONOutput(t *testing.T) {
	objs := jsonLines(t, "--trace", trace(t), "--requests", "200", "--policies", "round-robin,kvselect-queue", "--json")
	if len(objs) != 2 || objs[0]["policy"] != "round-robin" || objs[1]["policy"] != "kvselect-queue" {
		t.Fatalf("got %v", objs)
	}
	for _, k := range []string{"policy", "requests", "hit_rate", "ttft_p50_ms", "ttft_p99_ms", "load_cv", "queued", "rejected"} {
		if _, ok := objs[1][k]; !ok {
			t.Fatalf("field %q missing from %v", k, objs[1])
		}
	}
	if objs[1]["requests"].(float64) != 200 {
		t.Fatalf("requests = %v, want 200", objs[1]["requests"])
	}
}

func TestWindowsOutput(t *testing.T) {
	objs := jsonLines(t, "--trace", trace(t), "--requests", "300", "--windows", "100", "--policies", "kvselect", "--baseline", "round-robin", "--json")
	if len(objs) != 1 {
		t.Fatalf("got %v", objs)
	}
	o := objs[0]
	if o["policy"] != "kvselect" || o["baseline"] != "round-robin" || o["windows"].(float64) != 3 || o["requests"].(float64) != 100 {
		t.Fatalf("summary %v", o)
	}
	var out, errb bytes.Buffer
	if err := run([]string{"--trace", trace(t), "--requests", "50", "--windows", "100"}, &out, &errb); err == nil {
		t.Fatal("a trace shorter than one window was accepted")
	}
}

func TestBadArguments(t *testing.T) {
	tr := trace(t)
	for _, args := range [][]string{
		{"--trace", tr, "--requests", "10", "--policies", "nope"},
		{"--trace", tr, "--requests", "10", "--windows", "-5"},
		{"--trace", tr, "--requests", "10", "--baseline", "round-robin"},
		{"--trace", tr, "--requests", "10", "--model", "gpt-9"},
		{"--trace", tr, "--requests", "10", "--kv-event-delay", "-1ms"},
	} {
		var out, errb bytes.Buffer
		if err := run(args, &out, &errb); err == nil {
			t.Errorf("%v was accepted", args)
		}
	}
}

func TestHelpSucceeds(t *testing.T) {
	var out, errb bytes.Buffer
	err := run([]string{"--help"}, &out, &errb)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(errb.String(), "-model") || !strings.Contains(errb.String(), "h100x8-70b") {
		t.Fatalf("--help: %v, usage %q", err, errb.String())
	}
}

func TestModels(t *testing.T) {
	tr := trace(t)
	seen := map[float64]bool{}
	for _, m := range []string{"legacy", "h100-8b", "h100x8-70b"} {
		objs := jsonLines(t, "--trace", tr, "--requests", "200", "--speedup", "4", "--policies", "round-robin", "--model", m, "--json")
		if objs[0]["model"] != m {
			t.Fatalf("model %v, want %s", objs[0]["model"], m)
		}
		seen[objs[0]["ttft_p50_ms"].(float64)] = true
	}
	if len(seen) != 3 {
		t.Fatalf("three models gave the same TTFT p50: %v", seen)
	}
}

// TestMixedFleetModel: --model joins presets with + into a mixed fleet, reported under that
// name, whose KV capacity is each preset's own unless --capacity-blocks sets one for all.
func TestMixedFleetModel(t *testing.T) {
	tr := trace(t)
	objs := jsonLines(t, "--trace", tr, "--requests", "200", "--speedup", "4", "--policies", "round-robin", "--model", "h100-8b+a100-8b", "--workers", "4", "--json")
	if objs[0]["model"] != "h100-8b+a100-8b" || objs[0]["fleet_blocks"].(float64) != 4*773 {
		t.Fatalf("mixed fleet: model %v, %v blocks; want h100-8b+a100-8b with 4 × 773", objs[0]["model"], objs[0]["fleet_blocks"])
	}
	objs = jsonLines(t, "--trace", tr, "--requests", "200", "--speedup", "4", "--policies", "round-robin", "--model", "h100-8b+a100-8b", "--workers", "4", "--capacity-blocks", "500", "--json")
	if objs[0]["fleet_blocks"].(float64) != 4*500 {
		t.Fatalf("--capacity-blocks 500: %v blocks, want 2000", objs[0]["fleet_blocks"])
	}
	var out, errb bytes.Buffer
	if err := run([]string{"--trace", tr, "--requests", "10", "--model", "h100-8b+gpt-9"}, &out, &errb); err == nil {
		t.Fatal("a mix with an unknown preset was accepted")
	}
}

func TestMarkdownOutput(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--trace", trace(t), "--requests", "300", "--speedup", "2", "--policies", "round-robin,kvselect,least-loaded", "--markdown"}
	if err := run(args, &out, &errb); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"| policy | hit rate |", "| round-robin |", "| kvselect |", "kvselect ÷ best other: mean ×", "kvselect ÷ best baseline (not kvselect-*): mean ×"} {
		if !strings.Contains(s, want) {
			t.Fatalf("markdown output lacks %q:\n%s", want, s)
		}
	}
	out.Reset()
	if err := run([]string{"--trace", trace(t), "--requests", "200", "--windows", "100", "--policies", "kvselect", "--markdown"}, &out, &errb); err != nil || !strings.Contains(out.String(), "| kvselect |") {
		t.Fatalf("windows markdown: %v\n%s", err, out.String())
	}
}
