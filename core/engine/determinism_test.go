package engine

// Determinism: the engine is pure, so the same script on a fresh engine with the same seed must
// produce the same outputs and the same effects, in the same order. Go randomises map iteration
// order on every range loop, so running a script twice inside one process exposes any output
// that depends on it. The scripts are the testdata/*.txt files plus randomly generated ones that
// spread many workers, bookings, peer bookings, sweeps and peer drops over several partitions.

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// detRuns is how many times each script is replayed against the first transcript.
const detRuns = 3

// TestDeterministicScripts replays every testdata script on fresh engines and compares the
// transcripts (outputs and every effect, in order).
func TestDeterministicScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	noErr(t, err)
	if len(files) == 0 {
		t.Fatalf("no scripts in testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cmds := readScriptCmds(t, f)
			checkDeterministic(t, cmds)
		})
	}
}

// TestDeterministicRandomScripts generates scripts with many partitions, workers and bookings,
// so that every map the engine ranges over has several entries, and replays each of them.
func TestDeterministicRandomScripts(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	for seed := range seeds {
		cmds := randomScript(t, uint64(seed))
		if !checkDeterministic(t, cmds) {
			t.Fatalf("seed %d: transcripts differ (script of %d commands)", seed, len(cmds))
		}
	}
}

// TestDeterministicTaintTie pins the float-summation case: the preferred-taint weights sum to 1
// or 0 depending on the order they are added in (1e20+1 rounds to 1e20), which changes a
// worker's cost and therefore the pick.
func TestDeterministicTaintTie(t *testing.T) {
	var cmds []scriptCmd
	add := func(line string) { cmds = append(cmds, parseCmd(t, line)) }
	add("register id=1 taints=a,b,c")
	add("register id=2 taints=a,c")
	for i := range 30 {
		add(fmt.Sprintf("select_and_reserve id=t%d tokens=0..8 prefer=a:1e20,b:1,c:-1e20", i))
	}
	if !checkDeterministic(t, cmds) {
		t.Fatalf("transcripts differ")
	}
}

// readScriptCmds parses a testdata script's commands, ignoring its expected outputs.
func readScriptCmds(t *testing.T, path string) []scriptCmd {
	var cmds []scriptCmd
	datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
		cmds = append(cmds, cmdOf(t, d))
		return d.Expected
	})
	return cmds
}

// checkDeterministic runs cmds detRuns+1 times and reports (as a test error, with the first
// differing line) whether every transcript equals the first.
func checkDeterministic(t *testing.T, cmds []scriptCmd) bool {
	t.Helper()
	want := transcript(t, cmds)
	for run := range detRuns {
		got := transcript(t, cmds)
		if slices.Equal(got, want) {
			continue
		}
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				t.Errorf("run %d differs at transcript line %d:\n got: %s\nwant: %s", run+1, i, got[i], want[i])
				return false
			}
		}
		t.Errorf("run %d: %d transcript lines, want %d", run+1, len(got), len(want))
		return false
	}
	return true
}

// transcript runs cmds on a fresh engine and returns each command with its output, followed by
// every effect the command produced.
func transcript(t *testing.T, cmds []scriptCmd) []string {
	s := newScriptState(t)
	var out []string
	for _, c := range cmds {
		got := s.run(c)
		out = append(out, fmt.Sprintf("%s %s -> %s", c.pos, c.name, got))
		fx, aff := takeOutbox(s.e)
		for _, ev := range fx {
			out = append(out, "  fx "+effectLine(&ev))
		}
		for _, ev := range aff {
			out = append(out, "  fx "+affinityLine(&ev))
		}
	}
	return out
}

// randomScript generates a script from seed: four partitions of workers with taints and DP
// ranks, then a mix of local bookings (some with preferred taints), peer bookings, lifecycle
// calls, clock ticks, sweeps and peer drops. Every ninth command prints the loads.
func randomScript(t testing.TB, seed uint64) []scriptCmd {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var cmds []scriptCmd
	add := func(format string, a ...any) { cmds = append(cmds, parseCmd(t, fmt.Sprintf(format, a...))) }
	add("new expiry=%dms", 800+rng.IntN(2000))
	const models, workers = 4, 16
	taints := []string{"a", "b", "c"}
	for id := 1; id <= workers; id++ {
		var ts []string
		for _, tn := range taints {
			if rng.IntN(2) == 0 {
				ts = append(ts, tn)
			}
		}
		add("register id=%d model=m%d dp=0:%d taints=%s", id, id%models, 1+rng.IntN(3), strings.Join(ts, ","))
	}
	var local, peer []string
	pick := func(ids []string) string {
		if len(ids) == 0 {
			return "none"
		}
		return ids[rng.IntN(len(ids))]
	}
	tokens := func() string {
		lo := 4 * rng.IntN(8)
		return fmt.Sprintf("%d..%d", lo, lo+4*(1+rng.IntN(6)))
	}
	for n := range 300 {
		m := rng.IntN(models)
		switch r := rng.IntN(100); {
		case r < 25:
			id := fmt.Sprintf("l%d", n)
			local = append(local, id)
			prefer := ""
			if rng.IntN(3) == 0 {
				prefer = " prefer=a:1e20,b:1,c:-1e20"
			}
			add("select_and_reserve id=%s model=m%d tokens=%s%s", id, m, tokens(), prefer)
		case r < 45:
			w := 1 + rng.IntN(workers)
			id := fmt.Sprintf("p%d", n)
			peer = append(peer, id)
			add("peer_add sender=peer%d id=%s model=m%d worker=%d tokens=%s", rng.IntN(3), id, w%models, w, tokens())
		case r < 55:
			add("free id=%s", pick(local))
		case r < 60:
			add("prefill_complete id=%s", pick(local))
		case r < 65:
			w := 1 + rng.IntN(workers)
			add("store worker=%d tokens=%s", w, tokens())
		case r < 77:
			add("tick %dms", 50+rng.IntN(400))
		case r < 87:
			add("sweep")
		case r < 95:
			var keep []string
			for range rng.IntN(4) {
				keep = append(keep, pick(peer))
			}
			add("drop_peer_except sender=peer%d model=m%d keep=%s", rng.IntN(3), m, strings.Join(keep, ","))
		default:
			add("drop_peer sender=peer%d", rng.IntN(3))
		}
		if n%9 == 8 {
			add("loads")
		}
	}
	add("tick 10s")
	add("sweep")
	add("loads")
	return cmds
}
