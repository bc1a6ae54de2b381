package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// --help and -h print the usage and exit 0 (flag.ErrHelp used to be reported as an error and
// exit 1). The real binary is built and run, because the exit status is what a user sees.
func TestHelpExitsZero(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kvselect-bench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, arg := range []string{"--help", "-h"} {
		out, err := exec.Command(bin, arg).CombinedOutput()
		if err != nil {
			t.Errorf("kvselect-bench %s: %v\n%s", arg, err, out)
		}
		if !strings.Contains(string(out), "-trace") {
			t.Errorf("kvselect-bench %s printed no usage:\n%s", arg, out)
		}
	}
	// A real flag error still fails.
	if err := exec.Command(bin, "--no-such-flag").Run(); err == nil {
		t.Error("kvselect-bench --no-such-flag exited 0")
	}
}
