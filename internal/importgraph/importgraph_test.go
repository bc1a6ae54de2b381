package importgraph

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

const module = "github.com/kvselect/kvselect/"

// rule forbids every package matched by pattern (except those in allow) from linking, directly
// or transitively, banned or any package below it.
type rule struct {
	pattern, banned, why string
	allow                []string
}

var rules = []rule{
	{pattern: module + "bus/...", banned: module + "core",
		why: "bus is transport and wire vocabulary; core builds on it, never the reverse"},
	{pattern: module + "recovery/...", banned: module + "core",
		why: "recovery speaks its own wire types; core translates them (package doc)"},
	{pattern: module + "bus/...", banned: "github.com/nats-io/nats-server/v2",
		why:   "only the embedded server (bus/natsembed) and the test helper link nats-server",
		allow: []string{module + "bus/natsembed", module + "bus/natstest"}},
	{pattern: module + "recovery/...", banned: "github.com/nats-io/nats-server/v2",
		why: "recovery needs a client connection, not a server"},
	{pattern: module + "http/aibrix/...", banned: module + "core",
		why:   "http/aibrix is the AIBrix protocol; its one adapter to core is http/aibrix/aibrixcore",
		allow: []string{module + "http/aibrix/aibrixcore"}},
	{pattern: module + "http/api/...", banned: module + "http/aibrix",
		why: "the Dynamo API and the AIBrix endpoint share only leaf packages (internal/authtoken)"},
}

// deps lists each non-test package matched by pattern with its transitive dependencies.
func deps(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, serr := os.Stat(goTool); serr != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("no go tool on PATH or in GOROOT (CI=true): the layering rules cannot be checked")
			}
			t.Skip("no go tool on PATH or in GOROOT")
		}
	}
	out, err := exec.Command(goTool, "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, pattern).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	if len(m) == 0 {
		t.Fatalf("go list %s matched nothing", pattern)
	}
	return m
}

func TestImportGraph(t *testing.T) {
	for _, r := range rules {
		for pkg, ds := range deps(t, r.pattern) {
			if contains(r.allow, pkg) {
				continue
			}
			for _, d := range ds {
				if d == r.banned || strings.HasPrefix(d, r.banned+"/") {
					t.Errorf("%s links %s: %s", pkg, d, r.why)
					break
				}
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
