package load

import "math"

// ctxEstimator learns a partition's context share κ: how much of a prefill's time is its new
// tokens' attention to cached context, in units of the prior's own attention cost per pair
// (speedEstimator, ctxRef). It is fitted over every rank's samples together, since the share is
// the engine's and model's (a partition is one model), and a single rank's traffic often cannot
// separate it from the per-token cost (a rank serving one hot prefix sees the same (t, c) in
// every sample). Pooled, the fleet's misses (c = 0) and hits (c large) tell the two apart.
//
// (a, b) is the forgetting, Huber-weighted least-squares fit of ms = a·x₁ + b·x₂ over the
// partition's samples (variance proportional to x₁, as the per-rank fit), regularised by
// pseudo-samples of priorMass·priorMS at a = 1 and b = κ₀ (the prior's K/kRef); κ = b/a,
// clipped to [0, maxCtx] and quantised to steps of 1/quantum. a is only the pooled speed that
// makes b's units comparable; each rank keeps its own factor. The memory is ctxMemory samples
// of the whole partition.
//
// Measured in the simulator (8 workers, a few thousand requests): κ = 1.16 on the vLLM-style 8B
// preset (sysprompt-onehot), 1.06 on the SGLang-style 8B one and 0.44–0.47 on the 70B TP8 preset
// (mixed), 0 on the legacy preset, timed by new tokens only (README, "Learned worker speed").
type ctxEstimator struct {
	learn   bool // samples may move the share off its prior (Tracker.SetContextShare)
	m       moments
	scale   float64
	samples uint64
	a, b    float64 // current fit
	b0      float64 // prior share
	kappa   float64 // published share
}

// ContextShareOf is the context share κ that prior model m's K stands for: K in units of kRef.
func ContextShareOf(m SpeedModel) float64 {
	if ref := ctxRef(m); ref > 0 && m.K >= 0 {
		return min(maxCtx, m.K/ref)
	}
	return 0
}

// ctxMemory is the context estimator's memory in samples of the partition.
const ctxMemory = 1024

// ctxFloor is the share below which κ is taken as 0: the bias of a worker that pays nothing
// for context but whose cache churns. A booking counted as a hit whose blocks were evicted
// before its prefill ran is recomputed in full, so its interval is long in proportion to the
// context it was booked with; on the legacy preset (no context cost) at overload, 48 agentic
// sessions on 1,000-block caches, that alone fitted κ = 0.16 and, priced, tipped the fleet into
// cache thrashing (mean TTFT 843 → 4,371 ms, TestNoCollapseUnderOverload). The engines that pay
// for context learn 0.44 (70B, eight GPUs) to 1.2.
const ctxFloor = 0.25

// ctxMinSamples is how many samples of the partition the share waits for before it moves off
// its prior: an early fit over a few dozen samples swings well past the floor.
const ctxMinSamples = 256

// setPrior sets the prior share κ₀ and refits.
func (c *ctxEstimator) setPrior(kappa0 float64) {
	c.b0 = min(maxCtx, max(0, kappa0))
	c.fit()
}

// observe takes one rank's sample (its features under its prior and its interval) and reports
// whether the published share changed.
func (c *ctxEstimator) observe(x1, x2, ms float64) bool {
	if !usable(x1, x2, ms) {
		return false
	}
	const f = 1 - 1.0/ctxMemory
	r := ms/x1 - (c.a + float64(c.b*(x2/x1)))
	var w float64
	w, c.scale = huber(r, c.scale, c.a, c.samples)
	c.m.add(x1, x2, ms, w, f)
	c.samples++
	return c.fit()
}

// fit solves the regularised 2×2 normal equations, publishes the quantised share and reports
// whether it changed.
func (c *ctxEstimator) fit() bool {
	const lambda = priorMass * priorMS
	m := &c.m
	p11, p22 := m.s11+lambda, m.s22+lambda
	q1, q2 := m.t1+lambda, m.t2+float64(lambda*c.b0)
	det := float64(p11*p22) - float64(m.s12*m.s12)
	c.a = (float64(q1*p22) - float64(m.s12*q2)) / det
	c.b = (float64(p11*q2) - float64(m.s12*q1)) / det
	kappa := c.b0
	if c.a > 0 && !math.IsInf(c.a, 0) && !math.IsNaN(c.b) {
		kappa = min(maxCtx, max(0, c.b/c.a))
	} else {
		c.a, c.b = 1, c.b0
	}
	switch {
	case !c.learn || c.samples < ctxMinSamples:
		kappa = c.b0
	case kappa < ctxFloor:
		kappa = 0
	}
	kappa = math.Round(kappa*quantum) / quantum
	changed := math.Float64bits(kappa) != math.Float64bits(c.kappa)
	c.kappa = kappa
	return changed
}
