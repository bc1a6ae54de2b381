package sim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

// simulatorSide are the files that own the simulator's truth: the event loop and the View's
// own methods. Everything else in the package (every policy, the engine-backed dynamo,
// kvselect and kvselect-queue included) must go through View methods, its KV-event sink and
// its lifecycle callbacks.
var simulatorSide = []string{"sim.go", "view.go", "view_observed.go"}

// truth are the names that reach the simulator's state. A *simulation is reachable only
// through View's unexported sim field (Run hands policies nothing else: a View, the Request,
// ids, block ids), so banning that selector and the simulator's types closes the door; the
// rest catch the engines' ground truth and the trace's generation length (a router sees
// max_tokens at best, never how many tokens a request will generate).
var truth = map[string]string{
	"sim": "View's simulation", "simulation": "the simulation", "simWorker": "a simulated worker",
	"CachedPrefix": "an engine's true cache", "scraped": "scrape internals", "freqs": "engine requests",
	"Output": "the generation length",
}

// traceSide may build Requests (they read and write Output); they make no routing decision.
// matrix_run.go sizes the matrix's tight cache so that the largest request fits.
var traceSide = map[string]bool{"trace.go": true, "synth.go": true, "synth_shapes.go": true, "windows.go": true, "matrix_run.go": true}

// TestNoPolicyReadsSimulatorTruth parses every non-test file outside the simulator side and
// fails on any use of a name that reaches the simulator's truth.
func TestNoPolicyReadsSimulatorTruth(t *testing.T) {
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		name := f.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || slices.Contains(simulatorSide, name) {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(file, func(n ast.Node) bool {
			var id *ast.Ident
			switch x := n.(type) {
			case *ast.SelectorExpr:
				id = x.Sel
			case *ast.Ident:
				if x.Name == "simulation" || x.Name == "simWorker" {
					id = x
				}
			}
			if id == nil {
				return true
			}
			what, bad := truth[id.Name]
			if bad && id.Name == "Output" && traceSide[name] {
				bad = false
			}
			if bad {
				t.Errorf("%s: %s reads %s", fset.Position(id.Pos()), id.Name, what)
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("only %d files checked: the audit is not looking at the policies", checked)
	}
}

// lifeProbe records, from the policy side, when each lifecycle callback arrives.
type lifeProbe struct {
	v          *View
	prefillAt  []float64
	doneAt     []float64
	pickAt     []float64
	pickWorker func(id int) int
}

func (p *lifeProbe) Name() string { return "life" }
func (p *lifeProbe) Pick(v *View, id int, _ *Request) int {
	p.v = v
	p.pickAt = append(p.pickAt, v.Now())
	if p.pickWorker != nil {
		return p.pickWorker(id)
	}
	return 0
}
func (p *lifeProbe) PrefillDone(int) { p.prefillAt = append(p.prefillAt, p.v.Now()) }
func (p *lifeProbe) Done(int)        { p.doneAt = append(p.doneAt, p.v.Now()) }

// TestPrefillDoneAtFirstToken: prefill_complete reaches the policy when the engine samples the
// first token (the end of the step computing the last prompt chunk), not when prefill starts,
// and free when the last token is sampled.
func TestPrefillDoneAtFirstToken(t *testing.T) {
	spec, _ := fleet.Preset(fleet.PresetH100_8B)
	in := 3*spec.MaxNumBatchedTokens + 100 // four chunks
	blocks := make([]uint64, (in+TraceBlockTokens-1)/TraceBlockTokens)
	for i := range blocks {
		blocks[i] = uint64(i + 1)
	}
	reqs := []Request{{ArrivalMS: 10, Input: in, Output: 3, Blocks: blocks}}
	p := &lifeProbe{}
	if _, err := Run(Config{Workers: 1, Model: fleet.PresetH100_8B}, reqs, p, nil); err != nil {
		t.Fatal(err)
	}
	prefill := spec.Step.PrefillMS(0, in, spec.MaxNumBatchedTokens)
	if len(p.prefillAt) != 1 || p.prefillAt[0] != 10+prefill {
		t.Fatalf("prefill_complete at %v, want %v (arrival + four chunked steps)", p.prefillAt, 10+prefill)
	}
	// Two decode steps after the first token.
	d1 := spec.Step.DecodeStepMS(in)
	d2 := spec.Step.DecodeStepMS(in + 1)
	if len(p.doneAt) != 1 || p.doneAt[0] != 10+prefill+d1+d2 {
		t.Fatalf("free at %v, want %v", p.doneAt, 10+prefill+d1+d2)
	}
}

// TestKVEventDelayAtEqualTimestamps: an event published at t with delay d is invisible to a
// request arriving at t (the same timestamp as the step that published it) and visible to one
// arriving at exactly t + d; with no delay it is visible at t.
func TestKVEventDelayAtEqualTimestamps(t *testing.T) {
	spec, _ := fleet.Preset(fleet.PresetH100_8B)
	blocks := []uint64{1, 2, 3, 4}
	a := Request{ArrivalMS: 0, Input: 4 * TraceBlockTokens, Output: 1, Blocks: blocks}
	done := spec.Step.PrefillMS(0, a.Input, spec.MaxNumBatchedTokens) // A's step ends, its events publish
	for _, tc := range []struct {
		name           string
		delay, arriveB float64
		want           int
	}{
		{"no delay, same instant", 0, done, 4},
		{"delay, same instant as publication", 5, done, 0},
		{"delay, just before delivery", 5, done + 4.999, 0},
		{"delay, exactly at delivery", 5, done + 5, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := a
			b.ArrivalMS = tc.arriveB
			p := &probe{}
			cfg := Config{Workers: 2, CapacityBlocks: 100, Model: fleet.PresetH100_8B, KVEventDelayMS: tc.delay}
			if _, err := Run(cfg, []Request{a, b}, p, nil); err != nil {
				t.Fatal(err)
			}
			if p.seen[1] != tc.want {
				t.Fatalf("B saw %d cached blocks, want %d", p.seen[1], tc.want)
			}
		})
	}
}

// TestEnginePoliciesLearnCacheFromEvents: the engine-backed policies (dynamo, kvselect,
// kvselect-queue) reach the workers' caches through the delivered KV events, the channel the
// audit above leaves them: B repeats A's prompt after A finished, on two otherwise idle
// workers; with A's events delivered every one of them follows A's cache.
func TestEnginePoliciesLearnCacheFromEvents(t *testing.T) {
	blocks := make([]uint64, 16)
	for i := range blocks {
		blocks[i] = uint64(i + 1)
	}
	in := len(blocks) * TraceBlockTokens
	spec, _ := fleet.Preset(fleet.PresetH100_8B)
	done := spec.Step.PrefillMS(0, in, spec.MaxNumBatchedTokens)
	for _, name := range []string{"dynamo", "kvselect", "kvselect-queue"} {
		reqs := []Request{{ArrivalMS: 0, Input: in, Output: 1, Blocks: blocks}, {ArrivalMS: done + 50, Input: in, Output: 1, Blocks: blocks}}
		cfg := Config{Workers: 2, CapacityBlocks: 200, Model: fleet.PresetH100_8B, KVEventDelayMS: 5}
		res, err := RunPolicy(name, cfg, reqs)
		if err != nil {
			t.Fatal(err)
		}
		if want := 15.0 / 32; res.HitRate != want {
			t.Fatalf("%s: hit rate %v, want %v (B reuses 15 of A's 16 blocks)", name, res.HitRate, want)
		}
	}
}
