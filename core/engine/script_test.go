package engine

// Data-driven engine scripts in the style of etcd/raft's tests, run by
// github.com/cockroachdb/datadriven. testdata/*.txt drive one engine, testdata/repl/*.txt two or
// three replicas (replscript_test.go). The language, and how to add a case, is documented in
// testdata/README.md. `go test ./core/engine -run 'TestScripts|TestReplicaScripts' -rewrite`
// regenerates every expected block from the actual output: review the diff against the
// behaviour the comments of the script state before committing it.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/kvselect/kvselect/kvwire"
)

// TestScripts runs every single-engine script.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.HasSuffix(path, ".txt") || strings.Contains(path, "/repl/") {
			t.Skip("not a single-engine script")
		}
		s := newScriptState(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			s.t = t
			return s.run(cmdOf(t, d))
		})
	})
}

// scriptCmd is one command line: its name, key=value arguments (a value may be a list:
// key=(a,b)) and bare flags.
type scriptCmd struct {
	t     testing.TB
	name  string
	args  map[string][]string
	flags []string
	pos   string
}

// cmdOf converts a datadriven directive.
func cmdOf(t testing.TB, d *datadriven.TestData) scriptCmd {
	c := scriptCmd{t: t, name: d.Cmd, args: map[string][]string{}, pos: d.Pos}
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			c.flags = append(c.flags, a.Key)
		} else {
			c.args[a.Key] = a.Vals
		}
	}
	return c
}

// parseCmd parses one command line (the determinism test's generated scripts).
func parseCmd(t testing.TB, line string) scriptCmd {
	name, args, err := datadriven.ParseLine(line)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return cmdOf(t, &datadriven.TestData{Pos: line, Cmd: name, CmdArgs: args})
}

func (c scriptCmd) fatalf(format string, a ...any) {
	c.t.Helper()
	c.t.Fatalf("%s: %s: %s", c.pos, c.name, fmt.Sprintf(format, a...))
}

func (c scriptCmd) has(key string) bool { _, ok := c.args[key]; return ok }

func (c scriptCmd) flag(name string) bool {
	for _, f := range c.flags {
		if f == name {
			return true
		}
	}
	return false
}

// str returns key's single value (def when absent).
func (c scriptCmd) str(key, def string) string {
	v, ok := c.args[key]
	if !ok {
		return def
	}
	if len(v) != 1 {
		c.fatalf("%s takes one value, got %q", key, v)
	}
	return v[0]
}

// list returns key's values ("a,b" and "(a,b)" alike).
func (c scriptCmd) list(key string) []string {
	var out []string
	for _, v := range c.args[key] {
		if v != "" {
			out = append(out, strings.Split(v, ",")...)
		}
	}
	return out
}

func (c scriptCmd) num(key string, def uint64) uint64 {
	v, ok := c.args[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(c.str(key, ""), 10, 64)
	if err != nil {
		c.fatalf("%s=%q is not a number", key, v)
	}
	return n
}

func (c scriptCmd) nums(key string) []uint64 {
	var out []uint64
	for _, v := range c.list(key) {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			c.fatalf("%s: %q is not a number", key, v)
		}
		out = append(out, n)
	}
	return out
}

func (c scriptCmd) float(key string) *float64 {
	if !c.has(key) {
		return nil
	}
	f, err := strconv.ParseFloat(c.str(key, ""), 64)
	if err != nil {
		c.fatalf("%s is not a number", key)
	}
	return &f
}

func (c scriptCmd) boolp(key string) *bool {
	if !c.has(key) {
		return nil
	}
	b, err := strconv.ParseBool(c.str(key, ""))
	if err != nil {
		c.fatalf("%s is not a bool", key)
	}
	return &b
}

func (c scriptCmd) dur(key string) time.Duration {
	d, err := time.ParseDuration(c.str(key, ""))
	if err != nil {
		c.fatalf("bad duration %s=%q", key, c.str(key, ""))
	}
	return d
}

// owner reads worker=N [rank=R].
func (c scriptCmd) owner() kvwire.Owner {
	return kvwire.Owner{Worker: c.num("worker", 0), Rank: uint32(c.num("rank", 0))}
}

// key reads [model=M] [group=G] (default partition when absent).
func (c scriptCmd) key() PartitionKey {
	return PartitionKey{Model: c.str("model", DefaultName), Group: c.str("group", DefaultName)}
}

// tokens parses key's "a..b[,c..d]" into token ids (half-open ranges).
func (c scriptCmd) tokens(key string) []uint32 {
	var out []uint32
	for _, part := range c.list(key) {
		lo, hi, ok := strings.Cut(part, "..")
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if !ok || err1 != nil || err2 != nil || b < a {
			c.fatalf("bad token range %q", part)
		}
		out = append(out, toks(a, b-a)...)
	}
	return out
}

// errLine prints an engine error with the sentinel it wraps.
func errLine(err error) string {
	n := sentinelName(err)
	switch {
	case errors.Is(err, ErrTooManyBookings):
		n = "too_many_bookings"
	case errors.Is(err, ErrTableFull):
		n = "table_full"
	}
	if n != "" {
		return fmt.Sprintf("error (%s): %v", n, err)
	}
	return fmt.Sprintf("error: %v", err)
}

// orNone joins lines, or says none.
func orNone(lines []string) string {
	if len(lines) == 0 {
		return "(none)"
	}
	return strings.Join(lines, "\n")
}
