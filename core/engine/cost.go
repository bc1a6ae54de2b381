package engine

import (
	"math"
)

// The cost function (spec §5.2–§5.3). Lower is better. For each eligible (worker, rank):
//
//	cached_tokens   = round((device + host_w·host_ext + disk_w·disk_ext) · block_size)
//	raw_prefill     = track ? active_prefill + max(isl, cached_tokens) : 0          (tokens)
//	decay_factor    = track && decay > 0 ? 1 / (1 + decay·((active_prefill − min_active_prefill)/bs)/request_blocks) : 1
//	overlap_credit  = credit·decay_factor·device + host_w·host_ext + disk_w·disk_ext   (blocks)
//	decode_cost     = active_blocks + (len(tracking hashes) − live prefix on the rank)
//	cost            = (scale·max(0, raw_prefill/bs − overlap_credit) + decode_cost
//	                   + request_w·active_requests) · preferred_taint_multiplier
//
// With the default weights this is exactly Dynamo's aggregated-worker formula.

// costs computes cost for every candidate in place. It runs for every schedulable rank on every
// selection, so the common case (no lower-tier hits, no decay) avoids float rounding and
// divisions. The per-rank arithmetic lives in dynamoTerms.cost, which the fast path (fast.go)
// shares, so both compute bit-identical costs.
func costs(cs []scored, n *normalized, blockSize uint32, w weights) {
	if w.kvselect {
		kvselectCosts(cs, n, blockSize, w)
		return
	}
	k := newDynamoTerms(n, blockSize, w)
	if k.decaying {
		for i := range cs {
			k.minActive = min(k.minActive, cs[i].Load.ActivePrefillTokens)
		}
	}
	for i := range cs {
		s := &cs[i]
		s.cost = k.cost(s.DeviceBlocks, s.HostExtBlocks, s.DiskExtBlocks, s.BookedPrefixBlocks, s.Load)
	}
}

// dynamoTerms holds the per-selection invariants of Dynamo's formula (see the top of this file).
// Invariant: when decaying, minActive must be set to the smallest ActivePrefillTokens among the
// partition's ranks before cost is called; otherwise it is unused.
type dynamoTerms struct {
	w         weights
	invBS     float64
	isl       uint64
	reqBlocks float64
	decaying  bool
	minActive uint64
	nseq      int
	// simple: prefill is tracked and nothing decays (cost's inlined case); bs, scale, credit and
	// reqWeight copy the block size and weights for it.
	simple                   bool
	bs                       uint64
	scale, credit, reqWeight float64
}

func newDynamoTerms(n *normalized, blockSize uint32, w weights) dynamoTerms {
	reqBlocks := float64(n.requestBlocks(blockSize))
	k := dynamoTerms{
		w: w, invBS: 1 / float64(blockSize), isl: n.isl, reqBlocks: reqBlocks,
		decaying: w.trackPrefill && w.decay > 0 && reqBlocks > 0, minActive: math.MaxUint64, nseq: len(n.seq),
		bs: uint64(blockSize), scale: w.scale, credit: w.credit, reqWeight: w.reqWeight,
	}
	k.simple = w.trackPrefill && !k.decaying
	return k
}

// cost is one rank's cost from its tiered overlap (blocks), booked prefix (blocks) and load. The
// operations and their order are the formula's; any change here changes decisions.
//
// Rounding: every product that is added to something is wrapped in an explicit float64
// conversion, which (Go spec, "Arithmetic operators") forbids fusing it into a multiply-add. On
// amd64 (no FMA at the default GOAMD64=v1) this changes nothing; on architectures with FMA it
// keeps costs — and therefore decisions — identical across architectures and across the call
// sites that inline simpleCost.
func (k *dynamoTerms) cost(dev, host, disk int32, booked int, l *RankLoad) float64 {
	if host|disk == 0 && k.simple {
		return k.simpleCost(dev, booked, l.ActivePrefillTokens, l.ActiveBlocks, l.ActiveRequests)
	}
	return k.costGeneral(dev, host, disk, booked, l.ActivePrefillTokens, l.ActiveBlocks, l.ActiveRequests)
}

// simpleCost is cost in the common case — prefill tracked, no decay, device-tier overlap only —
// with exactly the operations costGeneral performs for it. It is small enough to inline into the
// per-rank loops; callers check host|disk == 0 && k.simple.
func (k *dynamoTerms) simpleCost(dev int32, booked int, prefill, blocks uint64, requests int) float64 {
	rawPrefill := float64(prefill + max(k.isl, uint64(dev)*k.bs))
	credit := float64(float64(dev) * k.credit)
	decodeCost := float64(blocks) + float64(k.nseq-booked)
	return float64(k.scale*max(0, float64(rawPrefill*k.invBS)-credit)) + decodeCost + float64(k.reqWeight*float64(requests))
}

// costGeneral is cost for every case, from the rank's active prefill tokens, active blocks and
// active requests.
func (k *dynamoTerms) costGeneral(dev, host, disk int32, booked int, prefill, blocks uint64, requests int) float64 {
	w := &k.w
	var rawPrefill float64
	if w.trackPrefill {
		var cached uint64
		if host == 0 && disk == 0 {
			cached = uint64(dev) * k.bs
		} else {
			cached = cachedTokensOf(dev, host, disk, k.bs, w)
		}
		rawPrefill = float64(prefill + max(k.isl, cached))
	}
	credit := float64(float64(dev) * w.credit)
	if k.decaying {
		rel := float64(float64(prefill-k.minActive) * k.invBS)
		credit /= 1 + float64(w.decay*rel)/k.reqBlocks
	}
	if host != 0 || disk != 0 {
		credit += float64(w.host*float64(host)) + float64(w.disk*float64(disk))
	}
	decodeCost := float64(blocks) + float64(k.nseq-booked)
	return float64(w.scale*max(0, float64(rawPrefill*k.invBS)-credit)) + decodeCost + float64(w.reqWeight*float64(requests))
}

// cachedTokens is the effective cached token count of a candidate (never negative).
func cachedTokens(s *scored, bs uint64, w weights) uint64 {
	return cachedTokensOf(s.DeviceBlocks, s.HostExtBlocks, s.DiskExtBlocks, bs, &w)
}

// cachedTokensOf is cachedTokens from the three tier counts.
func cachedTokensOf(dev, host, disk int32, bs uint64, w *weights) uint64 {
	eff := float64(dev) + float64(w.host*float64(host)) + float64(w.disk*float64(disk))
	return uint64(math.Round(max(0, eff*float64(bs))))
}

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

// pick chooses among eligible candidates: arg-min with uniformly random tie-breaks at
// temperature 0, otherwise a softmax draw over normalised costs. It returns -1 when no candidate
// is eligible.
func (e *Engine) pick(cs []scored, temperature float64) int {
	if temperature <= 0 {
		a := argmin{best: -1, rng: e.rng}
		for i := range cs {
			if cs[i].eligible {
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
		if cs[i].eligible {
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
			if cs[i].eligible {
				if k == 0 {
					return i
				}
				k--
			}
		}
	}
	total := 0.0
	for i := range cs {
		if cs[i].eligible {
			total += math.Exp(-(cs[i].cost - lo) / (span * t))
		}
	}
	u, acc, last := e.rng.Float64()*total, 0.0, -1
	for i := range cs {
		if !cs[i].eligible {
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
// the request is rejected with ErrOverloaded. The engine never waits; core's router queue parks
// such a request and retries it when load drops (core/queue_wait.go).
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
