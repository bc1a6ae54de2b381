package engine

// Scripted lifecycle tests in the style of etcd/raft's data-driven tests. Each file in
// testdata/*.txt is a sequence of blocks:
//
//	# comments and blank lines between blocks are kept
//	<command> [key=value ...] [flag ...]
//	----
//	<expected output, one or more non-blank lines>
//	<blank line or end of file>
//
// The test runs every command against one engine, on a virtual clock that only `tick` moves,
// and compares its output with the expected block. `go test -run TestScripts -rewrite`
// regenerates the expected blocks from the actual output (review the diff before committing).
//
// Commands (token ranges are half-open, "a..b" = a, a+1, …, b−1; ranges join with commas):
//
//	new [kv_events=false] [ttl=D] [expiry=D] [cache_ttl=D]   start a fresh engine at t0
//	register id=N [dp=START:SIZE] [model=M] [group=G] [bs=N] [endpoint=-]
//	delete id=N
//	store worker=N [rank=R] tokens=RANGE [parent=RANGE] [tier=T]
//	select [id=S] tokens=RANGE [pin=W/R] [advisory]
//	select_and_reserve [id=S] tokens=RANGE [pin=W/R]
//	reserve id=S [worker=N] [rank=R] [tokens=RANGE] [prefill=N]
//	prefill_complete id=S | output_block id=S [decay=F] | free id=S
//	tick D            advance the clock by a Go duration
//	sweep             run the expiry sweep at the current time
//	loads             every rank's (requests, decode blocks, prefill tokens)
//	effects           drain and print the replica events
//	pending           number of cached selections

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt scripts")

// TestScripts runs every testdata/*.txt script.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	noErr(t, err)
	if len(files) == 0 {
		t.Fatalf("no scripts in testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

// scriptCmd is one parsed command line.
type scriptCmd struct {
	name  string
	args  map[string]string
	flags map[string]bool
	line  int
}

func parseCmd(line string, n int) scriptCmd {
	fields := strings.Fields(line)
	c := scriptCmd{name: fields[0], args: map[string]string{}, flags: map[string]bool{}, line: n}
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			c.args[k] = v
		} else {
			c.flags[f] = true
		}
	}
	return c
}

// runScript executes one script file, comparing (or rewriting) expected outputs.
func runScript(t *testing.T, path string) {
	raw, err := os.ReadFile(path)
	noErr(t, err)
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	s := &scriptState{t: t}
	s.reset(nil)
	var out strings.Builder
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		cmd := parseCmd(line, i+1)
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command without ---- separator", path, i+1)
		}
		i += 2
		var want []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			want = append(want, lines[i])
		}
		got := s.run(cmd)
		if got == "" {
			got = "ok"
		}
		out.WriteString(line + "\n----\n" + got + "\n")
		if i < len(lines) {
			out.WriteString("\n")
		}
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s:%d: %s\n got:\n%s\nwant:\n%s", path, cmd.line, line, got, strings.Join(want, "\n"))
		}
	}
	if *rewrite {
		noErr(t, os.WriteFile(path, []byte(out.String()), 0o644))
	}
}

// scriptState is the engine under test and its virtual clock.
type scriptState struct {
	t   *testing.T
	e   *Engine
	now time.Time
}

func (s *scriptState) reset(cfg *Config) {
	s.e = newEngine(s.t, cfg)
	s.now = t0
}

// tokens parses "a..b[,c..d]" into token ids.
func (s *scriptState) tokens(c scriptCmd, key string) []uint32 {
	var out []uint32
	spec, ok := c.args[key]
	if !ok {
		return nil
	}
	for _, part := range strings.Split(spec, ",") {
		lo, hi, ok := strings.Cut(part, "..")
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if !ok || err1 != nil || err2 != nil || b < a {
			s.t.Fatalf("line %d: bad token range %q", c.line, part)
		}
		out = append(out, toks(a, b-a)...)
	}
	return out
}

func (s *scriptState) num(c scriptCmd, key string, def uint64) uint64 {
	v, ok := c.args[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		s.t.Fatalf("line %d: %s=%q is not a number", c.line, key, v)
	}
	return n
}

func (s *scriptState) dur(c scriptCmd, v string) time.Duration {
	d, err := time.ParseDuration(v)
	if err != nil {
		s.t.Fatalf("line %d: bad duration %q", c.line, v)
	}
	return d
}

func errLine(err error) string { return fmt.Sprintf("error (%s): %v", sentinelName(err), err) }

// run executes one command and returns its output.
func (s *scriptState) run(c scriptCmd) string {
	e := s.e
	switch c.name {
	case "new":
		cfg := DefaultConfig()
		if c.args["kv_events"] == "false" {
			cfg.UseKVEvents = false
		}
		if v, ok := c.args["ttl"]; ok {
			cfg.TTL = s.dur(c, v)
		}
		if v, ok := c.args["expiry"]; ok {
			cfg.ActiveRequestExpiry = s.dur(c, v)
		}
		if v, ok := c.args["cache_ttl"]; ok {
			cfg.SelectionCacheTTL = s.dur(c, v)
		}
		s.reset(&cfg)
		return "ok"
	case "register":
		id := s.num(c, "id", 0)
		ws := spec(id, func(w *WorkerSpec) { w.BlockSize = ptr(uint32(s.num(c, "bs", 4))) })
		if v, ok := c.args["dp"]; ok {
			a, b, _ := strings.Cut(v, ":")
			start, _ := strconv.Atoi(a)
			size, _ := strconv.Atoi(b)
			dp(uint32(start), uint32(size))(&ws)
		}
		if m, ok := c.args["model"]; ok {
			ws.ModelName = ptr(m)
		}
		if g, ok := c.args["group"]; ok {
			ws.RoutingGroup = ptr(g)
		}
		if c.args["endpoint"] == "-" {
			ws.Endpoint = nil
		}
		rec, err := e.UpsertWorker(ws)
		if err != nil {
			return errLine(err)
		}
		if len(rec.NotSchedulableReasons) > 0 {
			return fmt.Sprintf("worker %d %s: %s", id, rec.Lifecycle, strings.Join(rec.NotSchedulableReasons, "; "))
		}
		return fmt.Sprintf("worker %d %s", id, rec.Lifecycle)
	case "delete":
		rec, err := e.DeleteWorker(s.num(c, "id", 0))
		if err != nil {
			return errLine(err)
		}
		return fmt.Sprintf("worker %d %s", rec.WorkerID, rec.Lifecycle)
	case "store":
		o := kvwire.Owner{Worker: s.num(c, "worker", 0), Rank: uint32(s.num(c, "rank", 0))}
		tier := TierOf("device")
		if v, ok := c.args["tier"]; ok {
			tier = TierOf(v)
		}
		ev := storedEvent(o, tier, s.tokens(c, "parent"), s.tokens(c, "tokens"), 4)
		st := e.ApplyKVEvents(o, []KVEvent{ev})
		return fmt.Sprintf("stored %d dropped %d", st.StoredBlocks, st.Dropped)
	case "select", "select_and_reserve":
		req := &SelectRequest{Prompt: tokenPrompt(s.tokens(c, "tokens")), Advisory: c.flags["advisory"]}
		if id, ok := c.args["id"]; ok {
			req.SelectionID = ptr(id)
		}
		if v, ok := c.args["pin"]; ok {
			w, r, _ := strings.Cut(v, "/")
			wi, _ := strconv.ParseUint(w, 10, 64)
			ri, _ := strconv.ParseUint(r, 10, 32)
			req.PinnedWorker = &PinnedWorker{WorkerID: ptr(wi), DPRank: ptr(uint32(ri))}
		}
		var resp *SelectResponse
		var err error
		if c.name == "select" {
			resp, err = e.Select(req, s.now)
		} else {
			resp, err = e.SelectAndReserve(req, s.now)
		}
		if err != nil {
			return errLine(err)
		}
		out := fmt.Sprintf("worker=%d dp_rank=%d effective_prefill=%d potential_decode=%d gpu=%d",
			resp.WorkerID, resp.DPRank, resp.EffectivePrefillTokens, resp.PotentialDecodeBlocks, resp.Overlap.GPU)
		if resp.Booked != nil {
			out += fmt.Sprintf("\nbooked id=%s hashes=%d isl=%d track_prefill=%t", *resp.SelectionID, len(resp.SequenceHashes), resp.ISLTokens, resp.TrackPrefillTokens)
		}
		if wl := resp.WorkerLoad; wl != nil {
			out += fmt.Sprintf("\nworker_load active_prefill=%d capacity=%d", wl.ActivePrefillTokens, wl.PrefillTokenCapacity)
		}
		return out
	case "reserve":
		req := &ReservationRequest{SelectionID: ptr(c.args["id"])}
		if _, ok := c.args["worker"]; ok {
			req.WorkerID = ptr(s.num(c, "worker", 0))
			req.DPRank = ptr(uint32(s.num(c, "rank", 0)))
			req.Prompt = tokenPrompt(s.tokens(c, "tokens"))
			if _, ok := c.args["prefill"]; ok {
				req.EffectivePrefillTokens = ptr(s.num(c, "prefill", 0))
			}
		}
		resp, err := e.Reserve(req, s.now)
		if err != nil {
			return errLine(err)
		}
		return fmt.Sprintf("reserved %s on %d/%d", resp.SelectionID, resp.WorkerID, resp.DPRank)
	case "prefill_complete", "output_block", "free":
		id := c.args["id"]
		var err error
		switch c.name {
		case "prefill_complete":
			err = e.PrefillComplete(id)
		case "free":
			err = e.Free(id)
		default:
			var f *float64
			if v, ok := c.args["decay"]; ok {
				x, perr := strconv.ParseFloat(v, 64)
				if perr != nil {
					s.t.Fatalf("line %d: bad decay %q", c.line, v)
				}
				f = &x
			}
			err = e.OutputBlock(id, f)
		}
		if err != nil {
			return errLine(err)
		}
		return "ok"
	case "tick":
		if len(c.flags) != 1 {
			s.t.Fatalf("line %d: tick takes one duration", c.line)
		}
		for v := range c.flags {
			s.now = s.now.Add(s.dur(c, v))
		}
		return fmt.Sprintf("now t0+%s", s.now.Sub(t0))
	case "sweep":
		return fmt.Sprintf("freed %d", e.Sweep(s.now))
	case "loads":
		var out []string
		for _, pl := range e.Loads("", "") {
			for _, l := range pl.Loads {
				out = append(out, fmt.Sprintf("%s/%s %d/%d %s", pl.ModelName, pl.RoutingGroup, l.WorkerID, l.DPRank, triple(l)))
			}
		}
		if len(out) == 0 {
			return "(no partitions)"
		}
		return strings.Join(out, "\n")
	case "effects":
		fx := e.TakeEffects(nil)
		if len(fx) == 0 {
			return "(none)"
		}
		var out []string
		for _, ev := range fx {
			line := fmt.Sprintf("%s %s %d/%d", kindName(ev.Kind), ev.RequestID, ev.Owner.Worker, ev.Owner.Rank)
			if a := ev.Add; a != nil {
				line += fmt.Sprintf(" hashes=%d isl=%d prefill=%d track=%t", len(a.TokenSequence), a.ISL, a.PrefillTokens, a.TrackPrefill)
			}
			out = append(out, line)
		}
		return strings.Join(out, "\n")
	case "pending":
		return fmt.Sprintf("pending %d", e.PendingSelections())
	}
	s.t.Fatalf("line %d: unknown command %q", c.line, c.name)
	return ""
}

func kindName(k LifecycleKind) string {
	switch k {
	case LifecycleAdd:
		return "add"
	case LifecyclePrefillComplete:
		return "prefill_complete"
	case LifecycleFree:
		return "free"
	}
	return fmt.Sprintf("kind(%d)", k)
}
