package load

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// mixedPrompt draws half misses (200–12,199 tokens, no context) and half hits (200–2,199 new
// tokens after 4K–36K cached), as a fleet with shared prefixes and conversations sees them.
func mixedPrompt(rng *rand.Rand) (uint64, uint64) {
	if rng.IntN(2) == 0 {
		return uint64(200 + rng.IntN(12000)), 0
	}
	return uint64(200 + rng.IntN(2000)), uint64(4096 + rng.IntN(32768))
}

// hotPrompt is one hot prefix's hits only: the same 800 new tokens after 16K cached, every time.
func hotPrompt(*rand.Rand) (uint64, uint64) { return 800, 16384 }

// contextFleet runs 500 requests on each of four FIFO workers of one tracker whose truth is
// testTruth plus a context cost of kappa × the prior's attention per pair (at the truth's
// speed); worker 1 serves only hotPrompt. It returns the tracker, its owners and the truth.
func contextFleet(t *testing.T, kappa float64) (*Tracker, []kvwire.Owner, SpeedModel) {
	t.Helper()
	truth := testTruth
	truth.K = 2.5 * kappa * ctxRef(testPrior)
	tr := NewTracker()
	tr.SetDefaultSpeed(testPrior)
	tr.SetContextShare(0, true)
	var owners []kvwire.Owner
	for i := range 4 {
		o := kvwire.Owner{Worker: uint64(i + 1)}
		tr.AddOwner(o)
		owners = append(owners, o)
		w := &fifoWorker{truth: truth, rng: rand.New(rand.NewPCG(uint64(i), 31)), prompt: mixedPrompt}
		if i == 0 {
			w.prompt = hotPrompt
		}
		w.run(t, tr, o, 500, 600, func(int) float64 { return 1 })
	}
	return tr, owners, truth
}

func workErr(got, want SpeedModel, tokens, ctx float64) float64 {
	return math.Abs(got.WorkMS(tokens, ctx)-want.WorkMS(tokens, ctx)) / want.WorkMS(tokens, ctx)
}

// TestContextShareLearnedAcrossRanks: workers whose prefill pays for its attention to cached
// context teach the partition that share (κ within 10 %), and every rank — the one serving a
// single hot prefix included, whose own samples cannot separate the context cost from the
// per-token cost — then predicts misses and long hits within 10 % of the truth.
func TestContextShareLearnedAcrossRanks(t *testing.T) {
	tr, owners, truth := contextFleet(t, 0.7)
	if k := tr.ctx.kappa; math.Abs(k-0.7) > 0.07 {
		t.Errorf("context share %.3f, truth 0.7", k)
	}
	for _, o := range owners {
		m := tr.Speed(o).Model
		for _, c := range [][2]float64{{4000, 0}, {800, 16384}, {2000, 32768}} {
			if e := workErr(m, truth, c[0], c[1]); e > 0.10 {
				t.Errorf("worker %d: %.0f tokens after %.0f cached off by %.1f%%: %+v (truth %+v)", o.Worker, c[0], c[1], 100*e, m, truth)
			}
		}
	}
}

// TestContextShareZeroWithoutContextCost: on workers timed by new tokens only (the Dynamo
// mocker's polynomial, the legacy preset) the same traffic teaches no context cost, and the
// models are the context-free fit of before.
func TestContextShareZeroWithoutContextCost(t *testing.T) {
	tr, owners, truth := contextFleet(t, 0)
	if k := tr.ctx.kappa; k != 0 {
		t.Errorf("context share %v on workers that do not pay for context", k)
	}
	for _, o := range owners {
		m := tr.Speed(o).Model
		if m.K != 0 {
			t.Errorf("worker %d priced context at %v", o.Worker, m.K)
		}
		if e := workErr(m, truth, 4000, 0); e > 0.10 {
			t.Errorf("worker %d off by %.1f%% at 4,000 tokens: %+v", o.Worker, 100*e, m)
		}
	}
}

// TestContextShareWaitsForSamples: the share keeps its prior until ctxMinSamples samples of
// the partition, however strongly the first ones suggest otherwise.
func TestContextShareWaitsForSamples(t *testing.T) {
	tr := NewTracker()
	prior := testPrior
	prior.K = 0.5 * ctxRef(prior)
	tr.SetDefaultSpeed(prior)
	tr.SetContextShare(ContextShareOf(prior), true)
	o := kvwire.Owner{Worker: 1}
	tr.AddOwner(o)
	truth := testTruth
	truth.K = 2.5 * 2 * ctxRef(testPrior)
	w := &fifoWorker{truth: truth, rng: rand.New(rand.NewPCG(8, 31)), prompt: mixedPrompt}
	w.run(t, tr, o, ctxMinSamples-10, 600, func(int) float64 { return 1 })
	if k := tr.ctx.kappa; k != 0.5 {
		t.Fatalf("share %v after %d samples, want the prior 0.5", k, tr.ctx.samples)
	}
	if got, want := tr.Speed(o).Model.K, tr.Speed(o).Model.A/testPrior.A*0.5*ctxRef(testPrior); math.Abs(got-want) > 1e-12*want {
		t.Fatalf("K %v, want the rank's factor × prior share × kRef = %v", got, want)
	}
	o2 := kvwire.Owner{Worker: 2} // the partition's next samples come from another rank
	tr.AddOwner(o2)
	w.freeAt = 0
	w.run(t, tr, o2, 200, 600, func(int) float64 { return 1 })
	if k := tr.ctx.kappa; math.Abs(k-2) > 0.2 {
		t.Fatalf("share %v after %d samples, truth 2", k, tr.ctx.samples)
	}
}

// TestContextShareOffKeepsPrior: with learning off the share stays at its prior whatever the
// samples say, and at prior 0 every rank's model is the context-free fit, K = 0.
func TestContextShareOffKeepsPrior(t *testing.T) {
	tr := NewTracker()
	tr.SetDefaultSpeed(testPrior)
	o := kvwire.Owner{Worker: 1}
	tr.AddOwner(o)
	truth := testTruth
	truth.K = 2.5 * ctxRef(testPrior)
	(&fifoWorker{truth: truth, rng: rand.New(rand.NewPCG(9, 31)), prompt: mixedPrompt}).run(t, tr, o, 600, 600, func(int) float64 { return 1 })
	if k, n := tr.ContextShare(), tr.ctx.samples; k != 0 || n != 599 {
		t.Fatalf("share %v after %d samples with learning off, want 0 after 599", k, n)
	}
	if m := tr.Speed(o).Model; m.K != 0 {
		t.Fatalf("K = %v with learning off", m.K)
	}
	tr.SetContextShare(1, false)
	if k := tr.ContextShare(); k != 1 || tr.Speed(o).Model.K == 0 {
		t.Fatalf("share %v, K %v after setting the prior to 1", k, tr.Speed(o).Model.K)
	}
}

// TestContextShareFloorAbsorbsChurn: workers that pay nothing for context but whose caches
// churn — some booked hits find their prefix evicted and recompute it in full — give intervals
// that grow with the booked context, which the pooled fit reads as a small share; the floor keeps
// it at 0. (On the legacy preset's overloaded agentic workload the fit was 0.16, and priced it
// tipped the fleet into thrashing: TestNoCollapseUnderOverload.) A tenth of the hits churning
// fits about 0.05; the floor is for biases of that order. Heavier churn is not absorbed: with a
// fifth of the hits recomputed the fit is 0.79, which the Huber weights no longer treat as
// outliers.
func TestContextShareFloorAbsorbsChurn(t *testing.T) {
	tr := NewTracker()
	tr.SetDefaultSpeed(testPrior)
	tr.SetContextShare(0, true)
	for i := range 4 {
		o := kvwire.Owner{Worker: uint64(i + 1)}
		tr.AddOwner(o)
		w := &fifoWorker{truth: testTruth, rng: rand.New(rand.NewPCG(uint64(i), 77)), prompt: mixedPrompt, churn: 0.1}
		w.run(t, tr, o, 500, 600, func(int) float64 { return 1 })
	}
	fitted := tr.ctx.b / tr.ctx.a
	if !(fitted > 0.05) {
		t.Fatalf("fitted share %.3f: the churn must bias the fit for this test to mean anything", fitted)
	}
	if k := tr.ContextShare(); k != 0 {
		t.Fatalf("published share %v from a fit of %.3f, below the floor %v", k, fitted, ctxFloor)
	}
	t.Logf("churn-biased fit %.3f, published 0", fitted)
}
