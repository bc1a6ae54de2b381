package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// fleet registers three workers with different cached prefixes and loads, so that the built-in
// cost has a clear winner and custom scorers can overturn it.
func scoringEngine(t *testing.T, cfg Config, sc Scoring) *Engine {
	t.Helper()
	e, err := New(cfg, Options{Rand: rand.New(rand.NewPCG(1, 2)), Scoring: sc})
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		mustUpsert(t, e, spec(id, func(s *WorkerSpec) {
			s.TopologyDomains = map[string]string{"zone": []string{"", "a", "b", "c"}[id]}
			s.TotalKVBlocks = ptr(uint64(64)) // the kvselect terms that need a capacity take part
		}))
	}
	// Worker 2 caches the whole prompt: it wins the built-in cost.
	store(t, e, kvwire.Owner{Worker: 2}, toks(0, 16))
	return e
}

func TestScoringValidate(t *testing.T) {
	f := ScorerFunc(func(*SelectionContext, *Candidate) float64 { return 0 })
	for _, tc := range []struct {
		name string
		sc   Scoring
	}{
		{"unnamed", Scoring{Scorers: []WeightedScorer{{Weight: 1, Scorer: f}}}},
		{"duplicate", Scoring{Scorers: []WeightedScorer{{Name: "a", Weight: 1, Scorer: f}, {Name: "a", Weight: 1, Scorer: f}}}},
		{"nil", Scoring{Scorers: []WeightedScorer{{Name: "a", Weight: 1}}}},
		{"nan weight", Scoring{Scorers: []WeightedScorer{{Name: "a", Weight: math.NaN(), Scorer: f}}}},
		{"inf weight", Scoring{Scorers: []WeightedScorer{{Name: "a", Weight: math.Inf(1), Scorer: f}}}},
		{"empty cost", Scoring{ReplaceBuiltin: true}},
	} {
		if err := tc.sc.Validate(); !errors.Is(err, ErrScoring) {
			t.Errorf("%s: Validate() = %v, want ErrScoring", tc.name, err)
		}
		if _, err := New(DefaultConfig(), Options{Scoring: tc.sc}); !errors.Is(err, ErrScoring) {
			t.Errorf("%s: New() = %v, want ErrScoring", tc.name, err)
		}
	}
}

// zoneScorer prefers workers in the zone named by the request's agent header x-zone.
var zoneScorer = ScorerFunc(func(ctx *SelectionContext, c *Candidate) float64 {
	if z := ctx.AgentHeaders["x-zone"]; len(z) > 0 && c.Worker.TopologyDomains["zone"] == z[0] {
		return -1
	}
	return 0
})

func zoneReq(zone string) *SelectRequest {
	r := selReq("", toks(0, 16))
	sid := "s"
	r.SessionContext = &SessionContext{SessionID: &sid, AgentHeaders: map[string][]string{"x-zone": {zone}}}
	return r
}

func TestCustomScorerChangesDecision(t *testing.T) {
	base := scoringEngine(t, DefaultConfig(), Scoring{})
	if got, err := base.Select(zoneReq("c"), t0); err != nil || got.WorkerID != 2 {
		t.Fatalf("built-in: worker %v (%v), want 2 (it caches the prompt)", got, err)
	}
	custom := scoringEngine(t, DefaultConfig(), Scoring{Scorers: []WeightedScorer{{Name: "zone", Weight: 1000, Scorer: zoneScorer}}})
	if got, err := custom.Select(zoneReq("c"), t0); err != nil || got.WorkerID != 3 {
		t.Fatalf("zone scorer: worker %v (%v), want 3 (zone c)", got, err)
	}
	// A small weight only breaks near-ties: the cache still wins.
	weak := scoringEngine(t, DefaultConfig(), Scoring{Scorers: []WeightedScorer{{Name: "zone", Weight: 0.5, Scorer: zoneScorer}}})
	if got, err := weak.Select(zoneReq("c"), t0); err != nil || got.WorkerID != 2 {
		t.Fatalf("weak zone scorer: worker %v (%v), want 2", got, err)
	}
}

// TestBuiltinScorersReproduceBuiltinCost: replacing the built-in cost by the exported scorer of
// the same policy gives the same decisions and response fields.
func TestBuiltinScorersReproduceBuiltinCost(t *testing.T) {
	for _, cfg := range []Config{DefaultConfig(), KVSelectDefaults()} {
		scorer := DynamoScorer(cfg)
		if cfg.Policy == PolicyKVSelect {
			scorer = KVSelectScorer(cfg)
		}
		a := scoringEngine(t, cfg, Scoring{})
		b := scoringEngine(t, cfg, Scoring{ReplaceBuiltin: true, Scorers: []WeightedScorer{{Name: "builtin", Weight: 1, Scorer: scorer}}})
		rng := rand.New(rand.NewPCG(9, 9))
		for i := range 200 {
			// Random load and prompts, the same on both engines.
			tokens := toks(rng.IntN(4)*4, 4+rng.IntN(20))
			id := "r" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			ra, errA := a.SelectAndReserve(selReq(id, tokens), t0)
			rb, errB := b.SelectAndReserve(selReq(id, tokens), t0)
			if (errA == nil) != (errB == nil) {
				t.Fatalf("%s step %d: errors differ: %v vs %v", cfg.Policy, i, errA, errB)
			}
			if errA != nil {
				continue
			}
			if ra.WorkerID != rb.WorkerID || ra.DPRank != rb.DPRank || ra.EffectivePrefillTokens != rb.EffectivePrefillTokens {
				t.Fatalf("%s step %d: built-in chose %d, scorer chose %d", cfg.Policy, i, ra.WorkerID, rb.WorkerID)
			}
			// Per-candidate costs of both paths are compared by TestBuiltinScorersMatchBothPaths
			// (the engine without scorers takes the fast path, which keeps no candidate records).
			if rng.IntN(3) == 0 {
				_ = a.Free(id)
				_ = b.Free(id)
			}
		}
	}
}

func TestCustomPicker(t *testing.T) {
	var seen int
	highest := PickerFunc(func(_ *SelectionContext, cs []ScoredCandidate, _ *rand.Rand) int {
		seen = len(cs)
		best := 0
		for i := range cs {
			if cs[i].Cost > cs[best].Cost {
				best = i
			}
		}
		return best
	})
	e := scoringEngine(t, DefaultConfig(), Scoring{Picker: highest})
	r := selReq("", toks(0, 16))
	r.AllowedWorkerIDs = []uint64{1, 2}
	got, err := e.Select(r, t0)
	if err != nil || got.WorkerID != 1 {
		t.Fatalf("picker of the highest cost: worker %v (%v), want 1", got, err)
	}
	if seen != 2 {
		t.Fatalf("picker saw %d candidates, want only the 2 eligible ones", seen)
	}
	refuse := PickerFunc(func(*SelectionContext, []ScoredCandidate, *rand.Rand) int { return 7 })
	e = scoringEngine(t, DefaultConfig(), Scoring{Picker: refuse})
	if _, err := e.Select(selReq("", toks(0, 16)), t0); !errors.Is(err, ErrNoEndpoints) {
		t.Fatalf("out-of-range pick: %v, want ErrNoEndpoints", err)
	}
}

// TestDefaultScoringDoesNotAllocatePerCandidate: selection cost in allocations is independent of
// the number of ranks with the built-in scoring.
func TestDefaultScoringDoesNotAllocatePerCandidate(t *testing.T) {
	allocs := func(workers int) float64 {
		e := newEngine(t, nil)
		for id := uint64(1); id <= uint64(workers); id++ {
			mustUpsert(t, e, spec(id))
		}
		r := selReq("", toks(0, 64))
		_, _ = e.Select(r, t0)
		return testing.AllocsPerRun(50, func() { _, _ = e.Select(r, t0) })
	}
	small, large := allocs(4), allocs(256)
	if large > small {
		t.Fatalf("allocations grow with ranks: %v at 4 workers, %v at 256", small, large)
	}
}
