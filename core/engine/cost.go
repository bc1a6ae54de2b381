package engine

import "math"

// preferredTaintMultiplier is exp(−tanh(Σ weights of the preferred taints the worker has)).
// order lists pref's keys sorted: the sum is taken in that order, since a float sum depends on
// its order (1e20+1−1e20 is 0 or 1) and map order would make equal workers cost differently.
func preferredTaintMultiplier(have map[string]struct{}, pref map[string]float32, order []string) float64 {
	sum := 0.0
	for _, t := range order {
		if _, ok := have[t]; ok {
			sum += float64(pref[t])
		}
	}
	return math.Exp(-math.Tanh(sum))
}

// pick chooses among pickable candidates (eligible, and not away: kvselect_stick.go): arg-min
// with uniformly random tie-breaks at temperature 0, otherwise a softmax draw over normalised
// costs. It returns -1 when no candidate is pickable.
func (e *Engine) pick(cs []scored, temperature float64) int {
	if temperature <= 0 {
		a := argmin{best: -1, rng: e.rng}
		for i := range cs {
			if cs[i].pickable() {
				a.offer(i, cs[i].cost)
			}
		}
		return a.best
	}
	return e.softmax(cs, temperature)
}

// softmax draws a candidate with p_i ∝ exp(−(c_i − c_min)/((c_max − c_min)·T)).
func (e *Engine) softmax(cs []scored, t float64) int {
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for i := range cs {
		if cs[i].pickable() {
			lo, hi, n = min(lo, cs[i].cost), max(hi, cs[i].cost), n+1
		}
	}
	if n == 0 {
		return -1
	}
	span := hi - lo
	if math.IsInf(span, 0) || math.IsNaN(span) {
		span = max(math.Abs(lo), math.Abs(hi))
	}
	if span == 0 || math.IsInf(span, 0) {
		k := e.rng.IntN(n)
		for i := range cs {
			if cs[i].pickable() {
				if k == 0 {
					return i
				}
				k--
			}
		}
	}
	total := 0.0
	for i := range cs {
		if cs[i].pickable() {
			total += math.Exp(-(cs[i].cost - lo) / (span * t))
		}
	}
	u, acc, last := e.rng.Float64()*total, 0.0, -1
	for i := range cs {
		if !cs[i].pickable() {
			continue
		}
		acc += math.Exp(-(cs[i].cost - lo) / (span * t))
		last = i
		if acc >= u {
			return i
		}
	}
	return last
}

// pickable reports whether the default picker may choose the candidate.
func (s *scored) pickable() bool { return s.eligible && !s.away }

// bestOf returns the cheapest eligible candidate satisfying ok (lowest index on ties), or -1.
func bestOf(cs []scored, ok func(*scored) bool) int {
	best := -1
	for i := range cs {
		if cs[i].eligible && ok(&cs[i]) && (best < 0 || cs[i].cost < cs[best].cost) {
			best = i
		}
	}
	return best
}

// QueueRejection is the details object of a 429 overload rejection.
type QueueRejection struct {
	PolicyClass string `json:"policy_class"`
	LimitKind   string `json:"limit_kind"`
	Current     uint64 `json:"current"`
	Limit       uint64 `json:"limit"`
}

// admit applies the busy check of the router queue (spec §5.6): when every eligible rank is busy
// the request is rejected with ErrOverloaded. Under the router queue (SelectQueued,
// rqueue_admit.go) such a request parks instead and is dispatched when load drops; the engine
// never waits, its owner does (core/queue_wait.go).
func (e *Engine) admit(cs []scored, rule BusyRule) error {
	var pc poolCount
	for i := range cs {
		s := &cs[i]
		if !s.eligible {
			continue
		}
		if !pc.add(rule.busy(s.Load.ActivePrefillTokens, s.w)) && rule.Ratio == nil {
			return nil // one rank with room is enough
		}
	}
	if rule.poolBusy(pc) {
		return overloaded()
	}
	return nil
}

// poolCount counts the eligible ranks of a busy check and how many of them are busy.
type poolCount struct{ eligible, busy int }

// add counts one eligible rank and returns busy.
func (c *poolCount) add(busy bool) bool {
	c.eligible++
	if busy {
		c.busy++
	}
	return busy
}

// poolBusy reports whether the ranks counted in c make the pool busy under r: every one of them
// busy, or with Ratio at least Ratio × eligible of them; never when none is eligible.
func (r BusyRule) poolBusy(c poolCount) bool {
	if c.eligible == 0 {
		return false
	}
	if r.Ratio == nil {
		return c.busy == c.eligible
	}
	return float64(c.busy) >= *r.Ratio*float64(c.eligible)
}

// queueing reports whether admission applies to req: router queueing is configured, or core
// gave the request its policy class's busy rule.
func (e *Engine) queueing(req *SelectRequest) bool {
	return req.Busy != nil || e.cfg.QueueingEnabled()
}

// busyRule is the rule admission applies to req: its class's, or router_queue_threshold as a
// fraction of each worker's prefill capacity.
func (e *Engine) busyRule(req *SelectRequest) BusyRule {
	if req.Busy != nil {
		return *req.Busy
	}
	return BusyRule{Frac: e.cfg.QueueThreshold}
}

// busy reports whether a rank of worker w with this active prefill load is busy under r. A
// worker without max_num_batched_tokens has Dynamo's default capacity.
func (r BusyRule) busy(activePrefill uint64, w *worker) bool {
	if r.Tokens != nil && activePrefill > *r.Tokens {
		return true
	}
	if r.Frac != nil {
		capacity := float64(deref(w.spec.MaxNumBatchedTokens, DefaultPrefillCapacity))
		return float64(activePrefill) > *r.Frac*capacity
	}
	return false
}

// overloaded is the 429 rejection of admit.
func overloaded() error {
	return &Error{Kind: ErrOverloaded, Msg: "all eligible workers are overloaded",
		Details: QueueRejection{PolicyClass: "default", LimitKind: "prefill_tokens"}}
}
