package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/integration/sim"
)

func TestHelpExitsZero(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"--help"}, &out, &errb); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, f := range []string{"--quick", "--presets", "--trace", "--check", "--json"} {
		if !strings.Contains(errb.String(), f[2:]) {
			t.Fatalf("usage lacks %s:\n%s", f, errb.String())
		}
	}
}

func TestRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--quick", "--presets", "a100"},
		{"--quick", "--workers", "0"},
		{"--quick", "--targets", "-1"},
		{"--quick", "--candidates", "nosuch"},
		{"--quick", "--workloads", "nosuch"},
		{"--quick", "--capacities", "huge"},
		{"--quick", "--requests", "5"},
		{"--quick", "--seeds", "0"},
		{"--quick", "--seeds", "7,x"},
		{"--quick", "--seeds", "7,7"},
		{"--quick", "extra"},
		{"--traces", "/nonexistent"},
	} {
		var out, errb bytes.Buffer
		if err := run(args, &out, &errb); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%v accepted (%v)", args, err)
		}
	}
}

// TestOwnTraceJSONAndCheck runs a tiny matrix on a --trace workload: the JSON report decodes,
// and --check turns a failing cell into errFailing.
func TestOwnTraceJSONAndCheck(t *testing.T) {
	args := []string{"--trace", "synth:sysprompt?requests=120&prompts=3&sys=1024&user=128&output=16&rate=30&seed=4",
		"--presets", "legacy", "--workers", "2", "--capacities", "ample", "--targets", "1000",
		"--rivals", "round-robin,least-loaded", "--quiet", "--markdown", "", "--json", "-"}
	var out, errb bytes.Buffer
	if err := run(args, &out, &errb); err != nil {
		t.Fatalf("run: %v (%s)", err, errb.String())
	}
	var rep sim.MatrixReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out.String())
	}
	if len(rep.Cells) != 2 || rep.Cells[0].Workers != 2 || rep.Cells[0].Preset != "legacy" || len(rep.Cells[0].Verdicts) != 1 {
		t.Fatalf("report %+v", rep.Cells)
	}
	// Round-robin as the candidate against least-loaded misses the strict mean bar (0.9×) at
	// a queueing load, so --check must report failing cells.
	args = append(args[:len(args)-4], "--candidates", "round-robin", "--rivals", "least-loaded", "--check", "--markdown", "", "--json", "")
	out.Reset()
	err := run(args, &out, &errb)
	if !errors.Is(err, errFailing) {
		t.Fatalf("--check with a failing candidate: %v", err)
	}
}
