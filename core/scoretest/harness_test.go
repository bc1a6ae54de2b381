package scoretest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
)

// The built-in scorers pass their own conformance suite and allocate nothing.
func TestBuiltinScorers(t *testing.T) {
	for name, s := range map[string]engine.Scorer{
		"dynamo":   engine.DynamoScorer(engine.DefaultConfig()),
		"kvselect": engine.KVSelectScorer(engine.KVSelectDefaults()),
	} {
		t.Run(name, func(t *testing.T) {
			Scorer(t, s)
			f := gen(rand.New(rand.NewPCG(1, 1)), 4)
			if a := testing.AllocsPerRun(100, func() { _ = s.Score(&f.ctx, &f.cands[0]) }); a != 0 {
				t.Fatalf("%s allocates %v per call", name, a)
			}
		})
	}
}

// argMin is a well-behaved picker: the cheapest candidate, ties by owner.
var argMin = engine.PickerFunc(func(_ *engine.SelectionContext, cs []engine.ScoredCandidate, _ *rand.Rand) int {
	best := -1
	for i := range cs {
		if best < 0 || cs[i].Cost < cs[best].Cost {
			best = i
		}
	}
	return best
})

func TestPickerHarnessAcceptsArgMin(t *testing.T) { Picker(t, argMin) }

// recorder is a testing.TB whose Fatalf records the failure and ends the checking goroutine,
// so the harness itself can be tested against deliberately broken implementations.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}

// failure runs check against a recorder and returns its failure message ("" when it passed).
func failure(t *testing.T, check func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(r)
	}()
	<-done
	return r.msg
}

func TestHarnessCatchesBrokenImplementations(t *testing.T) {
	var calls int
	var kept *engine.Candidate
	for name, check := range map[string]func(tb testing.TB){
		"nan score": func(tb testing.TB) {
			Scorer(tb, engine.ScorerFunc(func(*engine.SelectionContext, *engine.Candidate) float64 { return math.NaN() }))
		},
		"mutates candidate": func(tb testing.TB) {
			Scorer(tb, engine.ScorerFunc(func(_ *engine.SelectionContext, c *engine.Candidate) float64 { c.DeviceBlocks++; return 0 }))
		},
		"mutates worker map": func(tb testing.TB) {
			Scorer(tb, engine.ScorerFunc(func(_ *engine.SelectionContext, c *engine.Candidate) float64 {
				c.Worker.TopologyDomains["zone"] = "x"
				return 0
			}))
		},
		"stateful": func(tb testing.TB) {
			Scorer(tb, engine.ScorerFunc(func(*engine.SelectionContext, *engine.Candidate) float64 { calls++; return float64(calls) }))
		},
		"retains candidate": func(tb testing.TB) {
			kept = nil
			Scorer(tb, engine.ScorerFunc(func(_ *engine.SelectionContext, c *engine.Candidate) float64 {
				if kept == nil {
					kept = c
				}
				return float64(kept.DeviceBlocks)
			}))
		},
		"order-dependent picker": func(tb testing.TB) {
			Picker(tb, engine.PickerFunc(func(*engine.SelectionContext, []engine.ScoredCandidate, *rand.Rand) int { return 0 }))
		},
		"out-of-range picker": func(tb testing.TB) {
			Picker(tb, engine.PickerFunc(func(_ *engine.SelectionContext, cs []engine.ScoredCandidate, _ *rand.Rand) int { return len(cs) }))
		},
		"unseeded picker": func(tb testing.TB) {
			Picker(tb, engine.PickerFunc(func(_ *engine.SelectionContext, cs []engine.ScoredCandidate, _ *rand.Rand) int {
				calls++
				return calls % len(cs)
			}))
		},
	} {
		if msg := failure(t, check); msg == "" {
			t.Errorf("%s: the harness did not catch it", name)
		} else {
			t.Logf("%s: caught: %s", name, msg)
		}
	}
}
