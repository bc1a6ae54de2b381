package load

import (
	"math"
	"math/rand/v2"
	"testing"
)

// oldEstimator is the context-free estimator before the context share (commit 08a36af), kept
// to check the claim that the estimator at κ = 0 is it, bit for bit.
type oldEstimator struct {
	prior, cur           SpeedModel
	num, den, mass, scal float64
	samples              uint64
}

func (e *oldEstimator) factor() float64 {
	return (e.num + priorMass*priorMS) / (e.den + priorMass*priorMS)
}

func (e *oldEstimator) observeWork(p, ms float64) {
	if !(ms > 0) || ms > maxSampleMS || !(p > 0) || !e.prior.Valid() {
		return
	}
	s := e.factor()
	r := ms/p - s
	a := math.Abs(r)
	w := 1.0
	if e.samples >= warmSamples {
		c := hubK * max(e.scal, 0.02*s)
		if a > c {
			w = c / a
		}
		a = min(a, 2*c)
	}
	if e.samples == 0 {
		e.scal = a
	} else {
		e.scal = float64(forget*e.scal) + float64((1-forget)*a)
	}
	e.num = float64(forget*e.num) + float64(w*ms)
	e.den = float64(forget*e.den) + float64(w*p)
	e.mass = float64(forget*e.mass) + w
	e.samples++
	s = e.factor()
	s = math.Exp(math.Round(math.Log(s)*quantum) / quantum)
	e.cur = SpeedModel{A: e.prior.A * s, B: e.prior.B * s, C: e.prior.C * s}
}

// TestEstimatorAtZeroShareIsTheOldOne: at κ = 0 the estimator's model, weight and scale are the
// context-free estimator's bit for bit, whatever context the samples carry, including
// outliers past the Huber threshold.
func TestEstimatorAtZeroShareIsTheOldOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var e speedEstimator
	e.reset(testPrior, 0)
	old := oldEstimator{prior: testPrior, cur: testPrior}
	for i := range 5000 {
		tokens, ctx := mixedPrompt(rng)
		ms := 2.5 * testTruth.MS(float64(tokens)) * (1 + 0.1*rng.NormFloat64())
		if rng.IntN(20) == 0 {
			ms *= 10
		}
		x1, x2 := features(testPrior, float64(tokens), float64(ctx))
		e.observeWork(x1, x2, ms)
		old.observeWork(x1, ms)
		if e.cur.A != old.cur.A || e.cur.B != old.cur.B || e.cur.C != old.cur.C || e.cur.K != 0 ||
			math.Float64bits(e.mass) != math.Float64bits(old.mass) || math.Float64bits(e.scale) != math.Float64bits(old.scal) {
			t.Fatalf("sample %d: %+v (mass %v, scale %v), old %+v (mass %v, scale %v)", i, e.cur, e.mass, e.scale, old.cur, old.mass, old.scal)
		}
	}
}
