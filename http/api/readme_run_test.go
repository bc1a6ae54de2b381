package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
)

// curlRE parses a command as curl() renders it: optional -X METHOD, the local URL, and an
// optional JSON body.
var curlRE = regexp.MustCompile(`(?s)^curl -s(?: -X ([A-Z]+))? 'http://localhost:8092([^']*)'(?: \\\n  -H 'Content-Type: application/json' \\\n  -d '(.*)')?\n?$`)

// TestREADMEExcerptRunsInOrder runs the README's walk-through excerpt itself, command by command
// in the order a reader would type it, against a fresh service configured as the excerpt says
// (KV events off, the binary's default policy, seeded for reproducible ids), and checks that
// every JSON answer the README shows is what the command just before it returns. A reader who
// copies the excerpt therefore sees these answers (up to generated selection ids).
func TestREADMEExcerptRunsInOrder(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	begin, end := strings.Index(s, "<!-- walkthrough:begin"), strings.Index(s, "<!-- walkthrough:end -->")
	if begin < 0 || end < begin {
		t.Fatal("README.md has no walkthrough markers")
	}
	if !strings.Contains(s[:begin], "DYN_ROUTER_USE_KV_EVENTS=false") {
		t.Fatal("the README no longer starts the walk-through service with KV events off; update this test's setup")
	}
	h := newHarnessWith(t, setup{edit: func(c *engine.Config) { c.Policy = engine.PolicyKVSelect }})
	fence := regexp.MustCompile("(?s)```(sh|json)\n(.*?)```")
	var last []byte // the previous command's answer, until a JSON block consumes it
	lastCmd := ""
	ran, compared := 0, 0
	for _, b := range fence.FindAllStringSubmatch(s[begin:end], -1) {
		if b[1] == "sh" {
			for _, cmd := range curlCommands(b[2]) {
				m := curlRE.FindStringSubmatch(cmd)
				if m == nil {
					t.Fatalf("README command is not a curl this test can run:\n%s", cmd)
				}
				method := m[1]
				if method == "" {
					method = "GET"
				}
				r := h.do(method, m[2], m[3])
				if r.status/100 != 2 {
					t.Fatalf("README command, run in order, fails: %s\n%s", r, cmd)
				}
				last, lastCmd = r.body, cmd
				ran++
			}
			continue
		}
		if last == nil {
			t.Fatalf("README shows a JSON answer with no command before it:\n%s", b[2])
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, last, "", "  "); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.TrimSpace(pretty.String()), strings.TrimSpace(b[2]); got != want {
			t.Errorf("README answer differs from what its command returns when the excerpt is run in order:\n%s\nREADME shows:\n%s\nservice answers:\n%s", lastCmd, want, got)
		}
		last = nil
		compared++
	}
	if ran < 6 || compared < 3 {
		t.Fatalf("ran %d commands and compared %d answers; the excerpt lost its content", ran, compared)
	}
}
