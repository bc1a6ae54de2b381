package load

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// fifoWorker is a synthetic deterministic worker: one prefill at a time in booking order, each
// taking scale × truth(t) × noise ms, plus rare outliers; requests arrive as a Poisson stream
// so that most of them queue.
type fifoWorker struct {
	truth    SpeedModel
	rng      *rand.Rand
	freeAt   float64 // ms at which the worker's prefill unit is free
	outliers float64 // probability of a 10× outlier interval
	// prompt, when set, draws each request's uncached and cached context tokens (the truth's
	// WorkMS times it); nil draws 200–12,199 uncached tokens without context.
	prompt func(rng *rand.Rand) (tokens, ctx uint64)
	// churn is the probability that a request booked with context finds it evicted and
	// recomputes it: its interval is the truth's for tokens + ctx uncached tokens.
	churn float64
}

// run books n requests on owner o of tr with the given mean gap (ms) and returns the fraction
// that waited behind another prefill.
func (w *fifoWorker) run(t *testing.T, tr *Tracker, o kvwire.Owner, n int, gapMS float64, scale func(i int) float64) float64 {
	t.Helper()
	type done struct {
		id string
		at float64
	}
	var pending []done
	now, queued := 0.0, 0
	flush := func(until float64) {
		for len(pending) > 0 && pending[0].at <= until {
			if err := tr.PrefillCompleteAt(pending[0].id, int64(pending[0].at*1e6)); err != nil {
				t.Fatal(err)
			}
			pending = pending[1:]
		}
	}
	for i := range n {
		now += w.rng.ExpFloat64() * gapMS
		flush(now)
		var tokens, ctx uint64
		if w.prompt != nil {
			tokens, ctx = w.prompt(w.rng)
		} else {
			tokens = uint64(200 + w.rng.IntN(12000))
		}
		id := fmt.Sprintf("r%d-%d", o.Worker, i)
		if err := tr.Add(Booking{ID: id, Owner: o, PrefillTokens: tokens, ContextTokens: ctx, AdmittedAt: int64(now * 1e6)}); err != nil {
			t.Fatal(err)
		}
		start := max(now, w.freeAt)
		if start > now {
			queued++
		}
		work := w.truth.WorkMS(float64(tokens), float64(ctx))
		if ctx > 0 && w.churn > 0 && w.rng.Float64() < w.churn {
			work = w.truth.MS(float64(tokens + ctx))
		}
		ms := scale(i) * work * (1 + 0.1*w.rng.NormFloat64())
		if w.rng.Float64() < w.outliers {
			ms *= 10
		}
		w.freeAt = start + max(ms, 0.1)
		pending = append(pending, done{id, w.freeAt})
	}
	flush(math.Inf(1))
	return float64(queued) / float64(n)
}

func relErr(got, want SpeedModel, tokens float64) float64 {
	return math.Abs(got.MS(tokens)-want.MS(tokens)) / want.MS(tokens)
}

var (
	testPrior = SpeedModel{A: 4.209989e-07, B: 1.518344e-02, C: 16.50142}
	// testTruth is 2.5 times slower than the prior.
	testTruth = SpeedModel{A: 2.5 * 4.209989e-07, B: 2.5 * 1.518344e-02, C: 2.5 * 16.50142}
)

func newSpeedTracker(prior SpeedModel) (*Tracker, kvwire.Owner) {
	tr := NewTracker()
	tr.SetDefaultSpeed(prior)
	o := kvwire.Owner{Worker: 1}
	tr.AddOwner(o)
	return tr, o
}

func TestSpeedConvergesUnderQueueing(t *testing.T) {
	tr, o := newSpeedTracker(testPrior)
	w := &fifoWorker{truth: testTruth, rng: rand.New(rand.NewPCG(1, 2))}
	// Mean service ≈ 2.5 × 130 ms; a 400 ms mean gap keeps the worker ~80 % busy.
	q := w.run(t, tr, o, 500, 400, func(int) float64 { return 1 })
	if q < 0.3 {
		t.Fatalf("only %.0f%% of requests queued: the test must exercise queueing", 100*q)
	}
	est := tr.Speed(o)
	for _, tok := range []float64{500, 4000, 12000} {
		if e := relErr(est.Model, testTruth, tok); e > 0.10 {
			t.Errorf("after 500 requests (%.0f%% queued) the model is off by %.1f%% at %v tokens: %+v", 100*q, 100*e, tok, est.Model)
		}
	}
	if est.Samples != 499 { // each sample is learned one completion late (speedtrack.go)
		t.Errorf("samples = %d, want 499", est.Samples)
	}
	// Booking → completion would count the queueing: that estimate is far off, which is why
	// the busy-stretch rule exists.
	t.Logf("queued %.0f%%, learned %+v (truth %+v)", 100*q, est.Model, testTruth)
}

func TestSpeedOutliersMoveLittle(t *testing.T) {
	clean, o := newSpeedTracker(testPrior)
	(&fifoWorker{truth: testTruth, rng: rand.New(rand.NewPCG(3, 4))}).run(t, clean, o, 500, 400, func(int) float64 { return 1 })
	dirty, _ := newSpeedTracker(testPrior)
	(&fifoWorker{truth: testTruth, rng: rand.New(rand.NewPCG(3, 4)), outliers: 0.05}).run(t, dirty, o, 500, 400, func(int) float64 { return 1 })
	c, d := clean.Speed(o).Model, dirty.Speed(o).Model
	if e := relErr(d, testTruth, 4000); e > 0.15 {
		t.Errorf("5%% of 10× outliers moved the model %.1f%% off the truth: %+v", 100*e, d)
	}
	if e := relErr(d, c, 4000); e > 0.15 {
		t.Errorf("5%% of 10× outliers moved the model %.1f%% from the clean run: %+v vs %+v", 100*e, d, c)
	}
	// A single absurd interval moves a converged estimate by a bounded step.
	before := dirty.Speed(o).Model
	if err := dirty.Add(Booking{ID: "x", Owner: o, PrefillTokens: 1000, AdmittedAt: 1 << 50}); err != nil {
		t.Fatal(err)
	}
	if err := dirty.PrefillCompleteAt("x", 1<<50+int64(500_000*1e6)); err != nil {
		t.Fatal(err)
	}
	if e := relErr(dirty.Speed(o).Model, before, 4000); e > 0.02 {
		t.Errorf("one 500 s interval moved the model by %.1f%%", 100*e)
	}
}

func TestSpeedFollowsASlowdown(t *testing.T) {
	tr, o := newSpeedTracker(testPrior)
	w := &fifoWorker{truth: testTruth, rng: rand.New(rand.NewPCG(5, 6))}
	w.run(t, tr, o, 1500, 3000, func(i int) float64 {
		if i >= 500 {
			return 2 // the worker becomes twice as slow (e.g. a noisy neighbour)
		}
		return 1
	})
	slow := SpeedModel{A: 2 * testTruth.A, B: 2 * testTruth.B, C: 2 * testTruth.C}
	if e := relErr(tr.Speed(o).Model, slow, 4000); e > 0.10 {
		t.Errorf("1000 prefills after a 2× slowdown the model is %.1f%% off: %+v", 100*e, tr.Speed(o).Model)
	}
}

func TestSpeedDeterministic(t *testing.T) {
	run := func() SpeedEstimate {
		tr, o := newSpeedTracker(testPrior)
		(&fifoWorker{truth: testTruth, rng: rand.New(rand.NewPCG(7, 8)), outliers: 0.02}).run(t, tr, o, 300, 1500, func(int) float64 { return 1 })
		return tr.Speed(o)
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("same inputs, different estimates: %+v vs %+v", a, b)
	}
}

func TestSpeedNoSampleWithoutTimeOrTokens(t *testing.T) {
	tr, o := newSpeedTracker(testPrior)
	for i, b := range []Booking{{ID: "a", Owner: o, PrefillTokens: 100}, {ID: "b", Owner: o}} {
		b.AdmittedAt = int64(i) * 1e9
		if err := tr.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	_ = tr.PrefillComplete("a")        // untimed
	_ = tr.PrefillCompleteAt("b", 5e9) // no tracked tokens
	if est := tr.Speed(o); est.Samples != 0 || est.Model != testPrior {
		t.Fatalf("estimate changed without a usable sample: %+v", est)
	}
	if (&Tracker{}).Speed(o) != (SpeedEstimate{}) || tr.SpeedAt(9) != (SpeedModel{}) {
		t.Fatal("unknown owners must have the zero estimate")
	}
}

// TestSpeedBatchedCompletions: a batching worker that prefills a whole batch in one step and
// completes all of it at once (one long interval, then intervals of 0) is learned at its true
// speed — the batch is one sample — instead of faster.
func TestSpeedBatchedCompletions(t *testing.T) {
	tr, o := newSpeedTracker(testPrior)
	rng := rand.New(rand.NewPCG(9, 9))
	now := int64(0)
	for b := range 120 {
		n := 1 + rng.IntN(8)
		var ids []string
		work := 0.0
		for i := range n {
			id := fmt.Sprintf("b%d-%d", b, i)
			tokens := uint64(200 + rng.IntN(4000))
			if err := tr.Add(Booking{ID: id, Owner: o, PrefillTokens: tokens, AdmittedAt: now}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
			work += testTruth.MS(float64(tokens))
		}
		now += int64(work * 1e6) // the batch's step(s), then every prefill completes at once
		for _, id := range ids {
			if err := tr.PrefillCompleteAt(id, now); err != nil {
				t.Fatal(err)
			}
		}
		now += 1e9 // idle until the next batch
	}
	if e := relErr(tr.Speed(o).Model, testTruth, 2000); e > 0.05 {
		t.Fatalf("batched completions learned %.1f%% off: %+v", 100*e, tr.Speed(o).Model)
	}
}
