//go:build quality

package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

// TestRobustnessMatrix is the full robustness matrix (FullMatrix over every preset) against
// issue 13's bar. It takes hours of CPU; run it with
//
//	go test -tags quality -run TestRobustnessMatrix -timeout 6h ./integration/sim/
//
// KVSELECT_MATRIX_PRESETS (comma-separated) narrows the presets, KVSELECT_MATRIX_OUT names a
// file prefix for the .md and .json reports. Every failing cell is reported with its
// kvselect-sim command.
func TestRobustnessMatrix(t *testing.T) {
	dir := filepath.Dir(tracePath(t, "mooncake_conversation_trace.jsonl"))
	presets := fleet.PresetNames()
	if p := os.Getenv("KVSELECT_MATRIX_PRESETS"); p != "" {
		presets = strings.Split(p, ",")
	}
	m := FullMatrix(dir, presets)
	rep, err := RunMatrix(m)
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv("KVSELECT_MATRIX_OUT"); out != "" {
		if err := os.WriteFile(out+".md", []byte(md.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(out + ".json")
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteJSON(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	t.Log("\n" + md.String())
	for _, f := range rep.Failures {
		t.Errorf("%s fails %s: %s\n  %s", f.Candidate, f.Cell, strings.Join(f.Failures, "; "), f.Repro)
	}
}
