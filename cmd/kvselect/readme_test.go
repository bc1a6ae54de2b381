package main

// TestREADMEFlags keeps README's "Operating kvselect" reference in step with the code: the
// flag list is the flag set's own usage text (parseFlags -h), and the environment list is every
// DYN_*, KVSELECT_* and NATS_* string literal the binary's packages contain. After adding a flag
// or a variable, regenerate:
//
//	go test ./cmd/kvselect -run TestREADMEFlags -update

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var updateREADME = flag.Bool("update", false, "rewrite README.md's generated flag and environment reference")

const (
	readmePath  = "../../README.md"
	beginMarker = "<!-- BEGIN generated: flags and environment (go test ./cmd/kvselect -run TestREADMEFlags -update) -->"
	endMarker   = "<!-- END generated: flags and environment -->"
)

// envSources are the directories whose non-test Go files make up the kvselect binary's
// configuration surface.
var envSources = []string{".", "../../core", "../../bus", "../../http", "../../recovery"}

var envName = regexp.MustCompile(`^(DYN|KVSELECT|NATS)_[A-Z0-9_]+$`)

// envVars returns every environment-variable-shaped string literal with the directories
// (relative to the module root) that mention it.
func envVars(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, root := range envSources {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel("../..", filepath.Dir(path))
			if root == "." {
				rel = "cmd/kvselect"
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil && envName.MatchString(s) && !slices.Contains(out[s], rel) {
						out[s] = append(out[s], rel)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// renderReference renders the generated block.
func renderReference(t *testing.T) string {
	t.Helper()
	var usage bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("parseFlags -h: %v", err)
	}
	var b strings.Builder
	b.WriteString(beginMarker + "\n\n")
	b.WriteString("Every flag, as `kvselect -h` prints it:\n\n```text\n")
	b.WriteString(strings.TrimRight(usage.String(), "\n") + "\n```\n\n")
	b.WriteString("Every environment variable the binary reads (`DYN_ROUTER_*` configure scheduling exactly as in Dynamo):\n\n")
	b.WriteString("| variable | read in |\n|---|---|\n")
	env := envVars(t)
	names := make([]string, 0, len(env))
	for n := range env {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "| `%s` | %s |\n", n, "`"+strings.Join(env[n], "`, `")+"`")
	}
	b.WriteString("\n" + endMarker)
	return b.String()
}

func TestREADMEFlags(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	got := renderReference(t)
	i, j := bytes.Index(readme, []byte(beginMarker)), bytes.Index(readme, []byte(endMarker))
	if i < 0 || j < i {
		t.Fatalf("README.md has no generated reference block (%q … %q)", beginMarker, endMarker)
	}
	cur := string(readme[i : j+len(endMarker)])
	if cur == got {
		return
	}
	if !*updateREADME {
		t.Fatalf("README.md's flag/environment reference is stale; regenerate with\n\tgo test ./cmd/kvselect -run TestREADMEFlags -update")
	}
	out := append(append(append([]byte{}, readme[:i]...), got...), readme[j+len(endMarker):]...)
	if err := os.WriteFile(readmePath, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestREADMEFlagsSeesEveryFlag guards the generator itself: every registered flag appears in the
// rendered block, so a flag cannot be missing from README while the test passes.
func TestREADMEFlagsSeesEveryFlag(t *testing.T) {
	got := renderReference(t)
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	var o options
	o.opsOptions.register(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(got, "-"+f.Name+" ") && !strings.Contains(got, "-"+f.Name+"\n") {
			t.Errorf("flag -%s missing from the generated reference", f.Name)
		}
	})
	for _, v := range []string{"DYN_ROUTER_USE_KV_EVENTS", "KVSELECT_SELECTION_POLICY"} {
		if !strings.Contains(got, "`"+v+"`") {
			t.Errorf("environment variable %s missing from the generated reference", v)
		}
	}
}
