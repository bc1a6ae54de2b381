package engine

// Determinism: the engine is pure, so the same script on a fresh engine with the same seed must
// produce the same outputs and the same effects, in the same order. Go randomises map iteration
// order on every range loop, so running a script twice inside one process exposes any output
// that depends on it. The scripts are the testdata/*.txt files plus randomly generated ones that
// spread many workers, bookings, peer bookings, sweeps and peer drops over several partitions.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
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
		cmds := randomScript(uint64(seed))
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
	add := func(line string) { cmds = append(cmds, parseCmd(line, len(cmds)+1)) }
	add("register_ext id=1 taints=a,b,c")
	add("register_ext id=2 taints=a,c")
	for i := range 30 {
		add(fmt.Sprintf("book id=t%d tokens=0..8 prefer=a:1e20,b:1,c:-1e20", i))
	}
	if !checkDeterministic(t, cmds) {
		t.Fatalf("transcripts differ")
	}
}

// readScriptCmds parses a testdata script's commands, ignoring its expected outputs.
func readScriptCmds(t *testing.T, path string) []scriptCmd {
	raw, err := os.ReadFile(path)
	noErr(t, err)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	var cmds []scriptCmd
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cmds = append(cmds, parseCmd(line, i+1))
		for i++; i < len(lines) && lines[i] != ""; i++ {
		}
	}
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
	s := &scriptState{t: t}
	s.reset(nil)
	var out []string
	var fx []ReplicaEvent
	for _, c := range cmds {
		got, ok := s.runExt(c)
		if !ok {
			got = s.run(c)
		}
		out = append(out, fmt.Sprintf("%d %s -> %s", c.line, c.name, got))
		fx = s.e.TakeEffects(fx[:0])
		for _, ev := range fx {
			out = append(out, "  fx "+effectLine(&ev))
		}
	}
	return out
}

// effectLine prints every field of a replica event.
func effectLine(ev *ReplicaEvent) string {
	s := fmt.Sprintf("%s/%s bs=%d %s %s %d/%d sender=%q", ev.Partition.Model, ev.Partition.Group, ev.BlockSize,
		kindName(ev.Kind), ev.RequestID, ev.Owner.Worker, ev.Owner.Rank, ev.Sender)
	if a := ev.Add; a != nil {
		s += fmt.Sprintf(" seq=%v track=%t prefill=%d isl=%d lora=%q republish=%t", a.TokenSequence, a.TrackPrefill,
			a.PrefillTokens, a.ISL, a.LoraName, a.Republish)
		if a.ExpectedOutputTokens != nil {
			s += fmt.Sprintf(" out=%d", *a.ExpectedOutputTokens)
		}
	}
	return s
}

// runExt runs the commands only the determinism scripts use; ok is false for any other command.
//
//	register_ext id=N [model=M] [dp=START:SIZE] [taints=a,b]
//	book id=S tokens=RANGE [model=M] [prefer=t:w,...]      select_and_reserve in model M
//	peer_add sender=P id=S worker=N [rank=R] [model=M] tokens=RANGE
//	drop_peer_except sender=P [model=M] [keep=a,b]
//	drop_peer sender=P
func (s *scriptState) runExt(c scriptCmd) (string, bool) {
	e := s.e
	model := c.args["model"]
	if model == "" {
		model = DefaultName
	}
	key := PartitionKey{Model: model, Group: DefaultName}
	switch c.name {
	case "register_ext":
		id := s.num(c, "id", 0)
		ws := spec(id, func(w *WorkerSpec) { w.ModelName = ptr(model) })
		if v, ok := c.args["dp"]; ok {
			a, b, _ := strings.Cut(v, ":")
			start, _ := strconv.Atoi(a)
			size, _ := strconv.Atoi(b)
			dp(uint32(start), uint32(size))(&ws)
		}
		if v := c.args["taints"]; v != "" {
			ws.Taints = strings.Split(v, ",")
		}
		rec, err := e.UpsertWorker(ws)
		if err != nil {
			return errLine(err), true
		}
		return fmt.Sprintf("worker %d %s", id, rec.Lifecycle), true
	case "book":
		req := &SelectRequest{ModelName: ptr(model), Prompt: tokenPrompt(s.tokens(c, "tokens")), SelectionID: ptr(c.args["id"])}
		if v := c.args["prefer"]; v != "" {
			pref := map[string]float32{}
			for _, kv := range strings.Split(v, ",") {
				k, w, _ := strings.Cut(kv, ":")
				f, err := strconv.ParseFloat(w, 32)
				noErr(s.t, err)
				pref[k] = float32(f)
			}
			req.RoutingConstraints = &RoutingConstraints{PreferredTaints: pref}
		}
		resp, err := e.SelectAndReserve(req, s.now)
		if err != nil {
			return errLine(err), true
		}
		return fmt.Sprintf("worker=%d dp_rank=%d effective_prefill=%d potential_decode=%d gpu=%d",
			resp.WorkerID, resp.DPRank, resp.EffectivePrefillTokens, resp.PotentialDecodeBlocks, resp.Overlap.GPU), true
	case "peer_add":
		seq := make([]uint64, 0, 4)
		for i, tok := range s.tokens(c, "tokens") {
			if i%4 == 3 {
				seq = append(seq, uint64(tok))
			}
		}
		ev := &ReplicaEvent{Partition: key, BlockSize: 4, RequestID: c.args["id"], Sender: c.args["sender"],
			Owner: kvwire.Owner{Worker: s.num(c, "worker", 0), Rank: uint32(s.num(c, "rank", 0))}, Kind: LifecycleAdd,
			Add: &ReplicaAdd{TokenSequence: seq, TrackPrefill: true, PrefillTokens: uint64(4 * len(seq)), ISL: uint64(4 * len(seq))}}
		return fmt.Sprintf("applied %t", e.ApplyReplica(ev, s.now)), true
	case "drop_peer_except":
		keep := map[string]struct{}{}
		if v := c.args["keep"]; v != "" {
			for _, id := range strings.Split(v, ",") {
				keep[id] = struct{}{}
			}
		}
		ids := e.DropPeerExcept(c.args["sender"], key, keep, nil)
		return fmt.Sprintf("dropped %v", ids), true
	case "drop_peer":
		return fmt.Sprintf("dropped %d", e.DropPeer(c.args["sender"])), true
	}
	return "", false
}

// randomScript generates a script from seed: four partitions of workers with taints and DP
// ranks, then a mix of local bookings (some with preferred taints), peer bookings, lifecycle
// calls, clock ticks, sweeps and peer drops. Every ninth command prints the loads.
func randomScript(seed uint64) []scriptCmd {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var cmds []scriptCmd
	add := func(format string, a ...any) { cmds = append(cmds, parseCmd(fmt.Sprintf(format, a...), len(cmds)+1)) }
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
		add("register_ext id=%d model=m%d dp=0:%d taints=%s", id, id%models, 1+rng.IntN(3), strings.Join(ts, ","))
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
			add("book id=%s model=m%d tokens=%s%s", id, m, tokens(), prefer)
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
