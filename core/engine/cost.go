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
// divisions.
func costs(cs []scored, n *normalized, blockSize uint32, w weights) {
	if w.kvselect {
		kvselectCosts(cs, n, blockSize, w)
		return
	}
	bs := float64(blockSize)
	invBS := 1 / bs
	isl := n.isl
	reqBlocks := float64(n.requestBlocks(blockSize))
	decaying := w.trackPrefill && w.decay > 0 && reqBlocks > 0
	minActive := uint64(math.MaxUint64)
	if decaying {
		for i := range cs {
			minActive = min(minActive, cs[i].Load.ActivePrefillTokens)
		}
	}
	nseq := len(n.seq)
	for i := range cs {
		s := &cs[i]
		l := s.Load
		var rawPrefill float64
		if w.trackPrefill {
			var cached uint64
			if s.HostExtBlocks == 0 && s.DiskExtBlocks == 0 {
				cached = uint64(s.DeviceBlocks) * uint64(blockSize)
			} else {
				cached = cachedTokens(s, uint64(blockSize), w)
			}
			rawPrefill = float64(l.ActivePrefillTokens + max(isl, cached))
		}
		credit := float64(s.DeviceBlocks) * w.credit
		if decaying {
			rel := float64(l.ActivePrefillTokens-minActive) * invBS
			credit /= 1 + w.decay*rel/reqBlocks
		}
		if s.HostExtBlocks != 0 || s.DiskExtBlocks != 0 {
			credit += w.host*float64(s.HostExtBlocks) + w.disk*float64(s.DiskExtBlocks)
		}
		decodeCost := float64(l.ActiveBlocks) + float64(nseq-s.BookedPrefixBlocks)
		s.cost = w.scale*max(0, rawPrefill*invBS-credit) + decodeCost + w.reqWeight*float64(l.ActiveRequests)
	}
}

// cachedTokens is the effective cached token count of a candidate (never negative).
func cachedTokens(s *scored, bs uint64, w weights) uint64 {
	eff := float64(s.DeviceBlocks) + w.host*float64(s.HostExtBlocks) + w.disk*float64(s.DiskExtBlocks)
	return uint64(math.Round(max(0, eff*float64(bs))))
}

// preferredTaintMultiplier is exp(−tanh(Σ weights of the preferred taints the worker has)).
func preferredTaintMultiplier(have map[string]struct{}, pref map[string]float32) float64 {
	sum := 0.0
	for t, wt := range pref {
		if _, ok := have[t]; ok {
			sum += float64(wt)
		}
	}
	return math.Exp(-math.Tanh(sum))
}

// pick chooses among eligible candidates: arg-min with uniformly random tie-breaks at
// temperature 0, otherwise a softmax draw over normalised costs. It returns -1 when no candidate
// is eligible.
func (e *Engine) pick(cs []scored, temperature float64) int {
	if temperature <= 0 {
		best, ties := -1, 0
		for i := range cs {
			if !cs[i].eligible {
				continue
			}
			switch {
			case best < 0 || cs[i].cost < cs[best].cost:
				best, ties = i, 1
			case cs[i].cost == cs[best].cost:
				// Reservoir sampling: the k-th tie replaces the choice with probability 1/k.
				ties++
				if e.rng.IntN(ties) == 0 {
					best = i
				}
			}
		}
		return best
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
// the request is rejected with 429. kvselect answers at once instead of parking the request in a
// queue; callers retry with their own backoff.
func (e *Engine) admit(cs []scored) error {
	frac := deref(e.cfg.QueueThreshold, math.Inf(1))
	anyEligible := false
	for i := range cs {
		s := &cs[i]
		if !s.eligible {
			continue
		}
		anyEligible = true
		capacity := float64(deref(s.w.spec.MaxNumBatchedTokens, DefaultPrefillCapacity))
		if float64(s.Load.ActivePrefillTokens) <= frac*capacity {
			return nil
		}
	}
	if !anyEligible {
		return nil
	}
	return &Error{Kind: ErrOverloaded, Msg: "all eligible workers are overloaded",
		Details: QueueRejection{PolicyClass: "default", LimitKind: "prefill_tokens"}}
}
