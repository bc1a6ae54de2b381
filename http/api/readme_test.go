package api_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEWalkthrough keeps the README's walk-through excerpt true: every curl command and
// every JSON response it shows must appear verbatim in testdata/walkthrough.md, which
// TestWalkthrough regenerates from the running service.
func TestREADMEWalkthrough(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(walkthroughFile)
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	begin, end := strings.Index(section, "<!-- walkthrough:begin"), strings.Index(section, "<!-- walkthrough:end -->")
	if begin < 0 || end < begin {
		t.Fatal("README.md has no walkthrough markers")
	}
	section = section[begin:end]
	fence := regexp.MustCompile("(?s)```(sh|json)\n(.*?)```")
	blocks := fence.FindAllStringSubmatch(section, -1)
	if len(blocks) < 6 {
		t.Fatalf("README walkthrough has %d code blocks, want at least 6", len(blocks))
	}
	for _, b := range blocks {
		var pieces []string
		if b[1] == "json" {
			pieces = []string{"```json\n" + b[2] + "```"}
		} else {
			pieces = curlCommands(b[2])
		}
		for _, p := range pieces {
			if !strings.Contains(string(full), p) {
				t.Errorf("README shows something the service does not answer (regenerate with -update and copy):\n%s", p)
			}
		}
	}
}

// curlCommands splits a shell block into commands (continuation lines end with a backslash).
func curlCommands(sh string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(sh, "\n") {
		if line == "" {
			continue
		}
		cur.WriteString(line)
		if !strings.HasSuffix(strings.TrimRight(line, "\n"), "\\") {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	return out
}
