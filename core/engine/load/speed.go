package load

import "math"

// SpeedModel is a rank's prefill-time model: a prefill of t uncached tokens that attend to c
// tokens of cached context takes
//
//	ms(t, c) = A·t² + B·t + C + K·t·c
//
// milliseconds of the rank's time. B is the per-token cost, A the attention among the new
// tokens (t² for the t²/2 query-key pairs of a causal prefill), C the fixed overhead of one
// prefill and K the attention of each new token to the cached context: an engine that reads
// the cached KV (vLLM, SGLang) spends t·c pairs on it, at twice A per pair if the prior's A is
// attention; one timed by a polynomial in new tokens only (the Dynamo mocker) spends nothing.
// The zero value is "unknown".
type SpeedModel struct{ A, B, C, K float64 }

// MS is the model's time for t uncached tokens without cached context.
func (m SpeedModel) MS(t float64) float64 { return float64(float64(float64(m.A*t)+m.B)*t) + m.C }

// WorkMS is the model's time for t uncached tokens after c cached ones: MS(t) + K·t·c.
func (m SpeedModel) WorkMS(t, c float64) float64 {
	return m.MS(t) + float64(float64(m.K*t)*c)
}

// Valid reports whether m is a usable model: finite, non-negative, with a positive per-token
// cost.
func (m SpeedModel) Valid() bool {
	ok := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }
	return ok(m.A) && ok(m.B) && ok(m.C) && ok(m.K) && m.B > 0
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
	// maxSampleMS drops intervals longer than ten minutes (a stuck or forgotten request), and
	// samples whose features (x₁, x₂: ms at the prior's speed) exceed it: a booking whose tokens
	// or context are absurd (a peer's bad PrefillTokens or ISL) would otherwise outweigh every
	// honest sample for thousands of completions.
	maxSampleMS = 600_000
)

// speedEstimator learns a rank's SpeedModel online from (uncached tokens, cached context tokens,
// service ms) samples. The model's shape is the prior's context-free part (the ratios A:B:C)
// plus the partition's context share κ (ctxEstimator, below): a prefill of t tokens after c
// cached ones is x₁ + κ·x₂ ms of work at the prior's speed, with x₁ = prior(t) and
// x₂ = kRef·t·c (ctxRef). What is learned per rank is its speed factor s, so that the rank's
// model is s × prior with K = s·κ·kRef. Three free terms cannot be told apart on real traffic —
// prompts cluster (short chat turns, one long shared prefix, hits and misses of a long
// conversation), and the booked uncached tokens differ from what the worker really computed
// whenever its cache changed in between — and a fit that trades the per-token term for the
// overhead, as one did in the simulator, prices queues wrongly by seconds. A per-rank fit of
// the context term trades it for the per-token term the same way: a rank serving only hits of
// one hot 16K-token prefix sees the same (t, c) in every sample, and in simulation such ranks
// learned 2× the per-token cost and no context cost while their neighbours learned the
// opposite. One factor per rank is well conditioned on any mix of prompt lengths, and it is
// what differs between a fast and a slow GPU, a large and a small model, or a worker that is
// sharing its GPU; the context share is a property of the engine and model, which a
// partition's ranks share, and is learned from all of them together.
//
// s is the forgetting, Huber-weighted least-squares estimate for ms = s·(x₁ + κ·x₂) with
// variance proportional to x₁, regularised by priorMass pseudo-samples at s = 1:
//
//	s = (t₁ + κ·t₂ + λ) / (s₁₁ + 2κ·s₁₂ + κ²·s₂₂ + λ),   λ = priorMass·priorMS,
//
// from decayed moments that do not depend on κ, so a new κ re-prices every past sample
// exactly. At κ = 0 (or without context, x₂ = 0 on every sample) it is the single factor
// s = Σ w·ms / Σ w·prior(t) of before, bit for bit. Residuals are measured as ratios
// (ms/x₁ − s·(1 + κ·x₂/x₁)) against a robust scale (the decayed mean of clipped absolute
// residuals). Memory is constant; every operation is a fixed sequence of floating-point
// operations, so it is deterministic.
//
// Invariant: cur is the prior's context-free part scaled by a positive, finite factor, with
// K = that factor × kappa × kRef (the zero model while the prior is unknown).
type speedEstimator struct {
	prior SpeedModel
	cur   SpeedModel
	m     moments
	mass  float64 // Σ decayed weights
	scale float64 // robust residual scale of the ratio
	// s is the current factor (solve), before quantisation; kappa the context share it is fitted
	// and published at (the tracker's ctxEstimator).
	s, kappa float64
	// samples counts the samples taken.
	samples uint64
}

// moments are decayed weighted sums over samples (x₁, x₂, ms) with weights w/x₁ (variance
// proportional to the context-free work, as before the context term): s11 = Σ w·x₁,
// s12 = Σ w·x₂, s22 = Σ w·x₂²/x₁, t1 = Σ w·ms, t2 = Σ w·ms·x₂/x₁.
type moments struct{ s11, s12, s22, t1, t2 float64 }

// add decays m by forget and adds the sample (x1, x2, ms) at weight w.
func (m *moments) add(x1, x2, ms, w, forget float64) {
	u := x2 / x1
	wx2, wms := float64(w*x2), float64(w*ms)
	m.s11 = float64(forget*m.s11) + float64(w*x1)
	m.s12 = float64(forget*m.s12) + wx2
	m.s22 = float64(forget*m.s22) + float64(wx2*u)
	m.t1 = float64(forget*m.t1) + wms
	m.t2 = float64(forget*m.t2) + float64(wms*u)
}

// maxCtx bounds the context share κ: four times the prior's own attention cost per pair, more
// than any engine's attention costs relative to its prefill (the simulator's presets learn
// 0.44–1.16, speed_context.go).
const maxCtx = 4

// ctxRef is kRef, the unit of the context coefficient for prior m: 2·A, the cost of one
// (query, context) pair if the prior's quadratic term is attention (A·t² for t²/2 pairs), or
// B/16384 when the prior has no quadratic term: a unit of the same order as the default
// prior's 2·A/B (1/18,000) and as an attention pair's cost against a token's weights pass on an
// 8B model (1/28,000, integration/fleet/model.go), so that κ stays of order 1.
func ctxRef(m SpeedModel) float64 {
	if m.A > 0 {
		return 2 * m.A
	}
	return m.B / 16384
}

// features are x₁ and x₂ of a prefill of t uncached tokens after c cached ones under prior m.
func features(m SpeedModel, t, c float64) (x1, x2 float64) {
	return m.MS(t), float64(ctxRef(m)*t) * c
}

// reset sets the prior and context share and forgets every sample.
func (e *speedEstimator) reset(prior SpeedModel, kappa float64) {
	*e = speedEstimator{prior: prior, kappa: kappa}
	e.solve()
}

// setPrior changes the prior, keeping the samples, and re-solves.
func (e *speedEstimator) setPrior(prior SpeedModel) {
	e.prior = prior
	e.solve()
}

// setKappa changes the context share, keeping the samples, and re-solves.
func (e *speedEstimator) setKappa(kappa float64) {
	e.kappa = kappa
	e.solve()
}

func (e *speedEstimator) estimate() SpeedEstimate {
	return SpeedEstimate{Model: e.cur, Samples: e.samples, Weight: e.mass}
}

// predictMS is the current fit's time for features x1 and x2.
func (e *speedEstimator) predictMS(x1, x2 float64) float64 {
	return float64(e.s * (x1 + float64(e.kappa*x2)))
}

// usable reports whether a sample with features x1, x2 and interval ms can be learned from.
func usable(x1, x2, ms float64) bool {
	return ms > 0 && ms <= maxSampleMS && x1 > 0 && x1 <= maxSampleMS && x2 >= 0 && x2 <= maxSampleMS
}

// observeWork takes one sample: work with features x1 (ms at the prior's speed, without context)
// and x2 (the context feature).
func (e *speedEstimator) observeWork(x1, x2, ms float64) {
	if !usable(x1, x2, ms) || !e.prior.Valid() {
		return
	}
	r := ms/x1 - float64(e.s*(1+float64(e.kappa*(x2/x1))))
	var w float64
	w, e.scale = huber(r, e.scale, e.s, e.samples)
	e.m.add(x1, x2, ms, w, forget)
	e.mass = float64(forget*e.mass) + w
	e.samples++
	e.solve()
}

// huber is the Huber weight of residual r against the robust scale (floored at 2 % of the
// current factor s) and the scale updated with r, clipped; the first warmSamples samples take
// full weight.
func huber(r, scale, s float64, samples uint64) (w, next float64) {
	abs := math.Abs(r)
	w = 1.0
	if samples >= warmSamples {
		c := hubK * max(scale, 0.02*s)
		if abs > c {
			w = c / abs
		}
		abs = min(abs, 2*c)
	}
	if samples == 0 {
		return w, abs
	}
	return w, float64(forget*scale) + float64((1-forget)*abs)
}

// factor is the regularised least-squares factor at the current κ (see speedEstimator).
func (e *speedEstimator) factor() float64 {
	const lambda = priorMass * priorMS
	m, k := &e.m, e.kappa
	if k == 0 {
		return (m.t1 + lambda) / (m.s11 + lambda)
	}
	num := m.t1 + float64(k*m.t2) + lambda
	den := m.s11 + float64(2*k*m.s12) + float64(float64(k*k)*m.s22) + lambda
	return num / den
}

// solve refits s and recomputes cur: the prior's context-free part scaled by s, quantised to
// steps of 1/quantum of itself (about 3 %), with K = s·κ·kRef: ranks whose speeds agree within
// noise then price equal work equally, so the selector's random tie-breaks between idle equal
// ranks stay random instead of always favouring whichever estimate came out a hair faster.
func (e *speedEstimator) solve() {
	e.s = e.factor()
	s := e.s
	if !(s > 0) || math.IsInf(s, 0) {
		e.s, e.cur = 1, e.prior
		return
	}
	s = math.Exp(math.Round(math.Log(s)*quantum) / quantum)
	e.cur = SpeedModel{A: e.prior.A * s, B: e.prior.B * s, C: e.prior.C * s, K: float64(s*e.kappa) * ctxRef(e.prior)}
}
