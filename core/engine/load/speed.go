package load

import "math"

// SpeedModel is a rank's prefill-time model: a prefill of t uncached tokens takes
//
//	ms(t) = A·t² + B·t + C
//
// milliseconds of the rank's time. B is the per-token cost, A the attention (quadratic) term and
// C the fixed overhead of one prefill. The zero value is "unknown".
type SpeedModel struct{ A, B, C float64 }

// MS is the model's time for t uncached tokens.
func (m SpeedModel) MS(t float64) float64 { return float64(float64(float64(m.A*t)+m.B)*t) + m.C }

// Valid reports whether m is a usable model: finite, non-negative, with a positive per-token
// cost.
func (m SpeedModel) Valid() bool {
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }
	return ok(m.A) && ok(m.B) && ok(m.C) && m.B > 0
}

// SpeedEstimate is what a rank's estimator knows: the model in use (the prior until samples
// arrive), how many samples it has taken and their effective (decayed, outlier-weighted) mass.
type SpeedEstimate struct {
	Model   SpeedModel
	Samples uint64
	Weight  float64
}

// Estimator constants. The prior counts as priorMass samples of priorMS each; every sample
// multiplies older evidence by forget (an effective memory of about 1/(1−forget) = 256
// samples), so a rank that speeds up or slows down is followed within a few hundred prefills;
// residuals beyond hubK robust scales get Huber weights; the first warmSamples samples are taken
// at full weight so that a poor prior does not make every early sample look like an outlier.
const (
	priorMass   = 2.0
	priorMS     = 100.0
	forget      = 1 - 1.0/256
	hubK        = 2.0
	warmSamples = 8
	// quantum sets the resolution of the published factor (solve).
	quantum = 32
	// maxSampleMS drops intervals longer than ten minutes (a stuck or forgotten request).
	maxSampleMS = 600_000
)

// speedEstimator learns a rank's SpeedModel online from (uncached tokens, service ms) samples.
// The model's shape (the ratios A:B:C) is the prior's; what is learned is the rank's speed
// factor s, so that the rank's model is s × prior. Three free terms cannot be told apart on
// real traffic — prompts cluster (short chat turns, one long shared prefix, hits and misses of
// a long conversation), and the booked uncached tokens differ from what the worker really
// computed whenever its cache changed in between — and a fit that trades the per-token term
// for the overhead, as one did in the simulator, prices queues wrongly by seconds. One factor
// is well conditioned on any mix of prompt lengths, and it is what differs between a fast and
// a slow GPU, a large and a small model, or a worker that is sharing its GPU.
//
// s is the forgetting, Huber-weighted least-squares estimate for ms = s·prior(t) with variance
// proportional to prior(t): s = Σ w·ms / Σ w·prior(t), regularised by priorMass pseudo-samples
// at s = 1. Residuals are measured as ratios (ms/prior(t) − s) against a robust scale (the
// decayed mean of clipped absolute residuals). Memory is constant; every operation is a fixed
// sequence of floating-point operations, so it is deterministic.
//
// Invariant: cur is prior scaled by a positive, finite factor (the zero model while the prior
// is unknown).
type speedEstimator struct {
	prior SpeedModel
	cur   SpeedModel
	num   float64 // Σ decayed w·ms
	den   float64 // Σ decayed w·prior(t)
	mass  float64 // Σ decayed weights
	scale float64 // robust residual scale of the ratio
	// samples counts the samples taken.
	samples uint64
}

// reset sets the prior and forgets every sample.
func (e *speedEstimator) reset(prior SpeedModel) {
	*e = speedEstimator{prior: prior, cur: prior}
}

// setPrior changes the prior, keeping the samples, and re-solves.
func (e *speedEstimator) setPrior(prior SpeedModel) {
	e.prior = prior
	e.solve()
}

func (e *speedEstimator) estimate() SpeedEstimate {
	return SpeedEstimate{Model: e.cur, Samples: e.samples, Weight: e.mass}
}

// factor is the current speed factor s.
func (e *speedEstimator) factor() float64 {
	return (e.num + priorMass*priorMS) / (e.den + priorMass*priorMS)
}

// observe takes one sample: a prefill of tokens uncached tokens that occupied the rank for ms.
// Non-finite, non-positive or absurd intervals, and samples while the prior is unknown, are
// ignored.
func (e *speedEstimator) observe(tokens uint64, ms float64) {
	if !e.prior.Valid() {
		return
	}
	e.observeWork(e.prior.MS(float64(tokens)), ms)
}

// observeWork is observe for work that takes p ms at the prior's speed.
func (e *speedEstimator) observeWork(p, ms float64) {
	if !(ms > 0) || ms > maxSampleMS || !(p > 0) || !e.prior.Valid() {
		return
	}
	s := e.factor()
	r := ms/p - s
	a := math.Abs(r)
	w := 1.0
	if e.samples >= warmSamples {
		c := hubK * max(e.scale, 0.02*s)
		if a > c {
			w = c / a
		}
		a = min(a, 2*c)
	}
	if e.samples == 0 {
		e.scale = a
	} else {
		e.scale = float64(forget*e.scale) + float64((1-forget)*a)
	}
	e.num = float64(forget*e.num) + float64(w*ms)
	e.den = float64(forget*e.den) + float64(w*p)
	e.mass = float64(forget*e.mass) + w
	e.samples++
	e.solve()
}

// solve recomputes cur as the prior scaled by the current factor, quantised to steps of
// 1/quantum of itself (about 3 %): ranks whose speeds agree within noise then price equal work
// equally, so the selector's random tie-breaks between idle equal ranks stay random instead of
// always favouring whichever estimate came out a hair faster.
func (e *speedEstimator) solve() {
	s := e.factor()
	if !(s > 0) || math.IsInf(s, 0) {
		e.cur = e.prior
		return
	}
	s = math.Exp(math.Round(math.Log(s)*quantum) / quantum)
	e.cur = SpeedModel{A: e.prior.A * s, B: e.prior.B * s, C: e.prior.C * s}
}
