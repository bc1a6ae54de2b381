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

// Estimator constants. The feature scale keeps the normal equations well conditioned (tokens in
// units of 1024); the prior counts as priorMass samples at 1024 tokens; every sample multiplies
// older evidence by forget (an effective memory of about 1/(1−forget) = 256 samples), so a rank
// that speeds up or slows down is followed within a few hundred prefills; residuals beyond
// hubK robust scales get Huber weights; the first warmSamples samples are taken at full weight
// so that a poor prior does not make every early sample look like an outlier.
const (
	featScale   = 1024.0
	priorMass   = 2.0
	forget      = 1 - 1.0/256
	hubK        = 2.5
	warmSamples = 8
	// maxSampleMS drops intervals longer than ten minutes (a stuck or forgotten request).
	maxSampleMS = 600_000
)

// speedEstimator learns a rank's SpeedModel online from (uncached tokens, service ms) samples by
// exponentially forgetting, Huber-weighted least squares on the features (u², u, 1), u = t/1024,
// regularised towards the prior (ridge of priorMass). Memory is constant; every operation is a
// few dozen floating-point operations in a fixed order, so it is deterministic.
//
// Invariant: cur is the prior (which may be the zero "unknown" model) or a Valid solution
// with its terms clamped to non-negative values.
type speedEstimator struct {
	prior SpeedModel
	cur   SpeedModel
	// s holds the decayed weighted normal matrix Σ w·x·xᵀ (upper triangle: 00 01 02 11 12 22)
	// and b the vector Σ w·x·y.
	s       [6]float64
	b       [3]float64
	mass    float64 // Σ decayed weights
	scale   float64 // robust residual scale (ms): decayed mean of clipped |residual|
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

// observe takes one sample: a prefill of tokens uncached tokens that occupied the rank for ms.
// Non-finite, non-positive or absurd intervals are ignored.
func (e *speedEstimator) observe(tokens uint64, ms float64) {
	if !(ms > 0) || ms > maxSampleMS {
		return
	}
	t := float64(tokens)
	pred := e.cur.MS(t)
	r := ms - pred
	w := 1.0
	if e.samples >= warmSamples {
		c := hubK * max(e.scale, 0.02*pred, 0.1)
		if a := math.Abs(r); a > c {
			w = c / a
		}
	}
	// The scale follows the clipped absolute residual, so one outlier moves it by a bounded step.
	clipped := math.Abs(r)
	if e.samples >= warmSamples {
		clipped = min(clipped, 2*hubK*max(e.scale, 0.02*pred, 0.1))
	}
	if e.samples == 0 {
		e.scale = clipped
	} else {
		e.scale = float64(forget*e.scale) + float64((1-forget)*clipped)
	}
	u := t / featScale
	x := [3]float64{u * u, u, 1}
	for i := range e.s {
		e.s[i] *= forget
	}
	for i := range e.b {
		e.b[i] = float64(forget*e.b[i]) + float64(w*x[i]*ms)
	}
	e.s[0] += float64(w * x[0] * x[0])
	e.s[1] += float64(w * x[0] * x[1])
	e.s[2] += float64(w * x[0])
	e.s[3] += float64(w * x[1] * x[1])
	e.s[4] += float64(w * x[1])
	e.s[5] += w
	e.mass = float64(forget*e.mass) + w
	e.samples++
	e.solve()
}

// solve recomputes cur from the normal equations plus the prior's ridge. Terms that come out
// negative are fixed at zero and the rest re-solved; a non-positive per-token cost, or a
// singular system, keeps the prior's.
func (e *speedEstimator) solve() {
	p := e.prior
	// Prior in feature coordinates: θ = (A·s², B·s, C), s = featScale.
	th0 := [3]float64{p.A * featScale * featScale, p.B * featScale, p.C}
	var m [3][3]float64
	m[0][0], m[0][1], m[0][2] = e.s[0], e.s[1], e.s[2]
	m[1][1], m[1][2], m[2][2] = e.s[3], e.s[4], e.s[5]
	m[1][0], m[2][0], m[2][1] = m[0][1], m[0][2], m[1][2]
	var v [3]float64
	for i := range 3 {
		m[i][i] += priorMass
		v[i] = e.b[i] + float64(priorMass*th0[i])
	}
	free := [3]bool{true, true, true}
	for range 3 {
		th, ok := solveMasked(m, v, free)
		if !ok {
			break
		}
		if th[0] < 0 && free[0] {
			free[0] = false
			continue
		}
		if th[2] < 0 && free[2] {
			free[2] = false
			continue
		}
		cand := SpeedModel{A: th[0] / (featScale * featScale), B: th[1] / featScale, C: th[2]}
		if cand.Valid() {
			e.cur = cand
			return
		}
		break
	}
	e.cur = p
}

// solveMasked solves m·θ = v over the free coordinates (the others are 0) by Gaussian
// elimination with partial pivoting; ok is false when the system is singular.
func solveMasked(m [3][3]float64, v [3]float64, free [3]bool) (th [3]float64, ok bool) {
	var idx [3]int
	n := 0
	for i := range 3 {
		if free[i] {
			idx[n] = i
			n++
		}
	}
	var a [3][4]float64
	for r := range n {
		for c := range n {
			a[r][c] = m[idx[r]][idx[c]]
		}
		a[r][3] = v[idx[r]]
	}
	for col := range n {
		piv := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[piv][col]) {
				piv = r
			}
		}
		if !(math.Abs(a[piv][col]) > 1e-12) {
			return th, false
		}
		a[col], a[piv] = a[piv], a[col]
		for r := range n {
			if r == col {
				continue
			}
			f := a[r][col] / a[col][col]
			for c := col; c < 4; c++ {
				a[r][c] -= float64(f * a[col][c])
			}
		}
	}
	for r := range n {
		th[idx[r]] = a[r][3] / a[r][r]
	}
	return th, true
}
