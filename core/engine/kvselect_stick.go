package engine

// Cache stickiness, the kvselect policy's rule for where a mostly cached prompt may go
// (Config.CacheStickShare, default ½). When some eligible rank holds at least that share of the
// request's prompt blocks — in the index or booked there by a live request, the cached blocks
// the cost counts — the request is placed among the ranks that do, by cost, unless an eligible
// rank outside them is idle (no prefill pending) with room for the prompt in its KV cache
// (active blocks plus the request's unbooked ones within its total_kv_blocks, or capacity not
// registered). Otherwise the cost alone decides, over every eligible rank.
//
// Why a rule and not another price. A move off a rank's cache pays only with capacity that would
// otherwise go unused. While every rank is busy, moving a conversation from its rank to a
// shorter queue relocates waiting and adds the recompute of its context, which the fleet pays in
// throughput; on a full cache the copy it stores evicts another session's, which then misses
// too. The cost prices that recompute as (1 + β) times its work with β capped (4), and as a
// linear price it loses to the queue differences an overloaded fleet builds: tens of seconds
// between ranks against a few seconds of recompute. Uncapping β (tried, README "Valuing reuse
// under load") moved the balance for every miss, including prompts cached nowhere. The rule
// keeps the cost everywhere it is informed — among the ranks holding the prompt, and over the
// whole fleet while some rank has idle capacity, which is when a hot prefix too big for its
// ranks needs a new replica — and removes only the moves that can only add work.
//
// The share is SGLang's cache-aware router default (cache_threshold 0.5): below it a prompt is
// mostly new work wherever it goes and the cost spreads it freely. Measured on the
// simulator's engine models (README, "Cache stickiness"): on the vLLM-style 8B matrix, both
// policy seeds, cells passing 98 → 102 of 216 and geometric-mean ratios to the best rival
// 0.820 / 1.124 / 0.865 → 0.797 / 1.084 / 0.847 (mean / p50 / p99); on the SGLang-style one
// 105 → 106 of 214 and 0.855 / 1.089 / 0.845 → 0.832 / 1.040 / 0.824; the overloaded
// agentic point (48 sessions, 1,000 blocks, 4×) 1.44× → 1.09× SGLang's router's mean.
//
// Only the default picker applies the rule (both selection paths, identically); a custom Picker
// sees every eligible candidate and its cost.

// stickiness is one selection's cache-stickiness rule: the blocks a rank must hold to be in the
// sticky set, and the request's blocks (the room check).
type stickiness struct {
	need, blocks float64
}

// newStickiness is the rule for prompt n in blocks of blockSize at share (0, or an empty
// prompt: no rule, ok false).
func newStickiness(share float64, n *normalized, blockSize uint32) (stickiness, bool) {
	if !(share > 0) || blockSize == 0 || n.isl == 0 {
		return stickiness{}, false
	}
	nb := float64(n.requestBlocks(blockSize))
	return stickiness{need: float64(share * nb), blocks: nb}, true
}

// holds reports whether a rank with dev indexed and booked live-booked leading blocks is in
// the sticky set.
func (s stickiness) holds(dev int32, booked int) bool {
	c := max(dev, int32(booked))
	return c > 0 && float64(c) >= s.need
}

// frees reports whether a rank outside the sticky set lifts the rule: no prefill pending, and
// room for the prompt (active blocks plus the request's blocks not booked there within
// capacity kvBlocks; 0 = not registered, room assumed).
func (s stickiness) frees(pending int, active uint64, booked int, kvBlocks uint64) bool {
	if pending > 0 {
		return false
	}
	return kvBlocks == 0 || float64(active)+s.blocks-float64(booked) <= float64(kvBlocks)
}

// markAway applies the rule on the general path: it sets away on every eligible candidate
// outside the sticky set when the rule holds, and clears it everywhere otherwise; it reports
// whether the rule held. pick skips away candidates.
func markAway(cs []scored, s stickiness) bool {
	in, freed := false, false
	for i := range cs {
		c := &cs[i]
		c.away = false
		if !c.eligible {
			continue
		}
		if s.holds(c.DeviceBlocks, c.BookedPrefixBlocks) {
			in = true
		} else if s.frees(c.Load.PendingPrefills, c.Load.ActiveBlocks, c.BookedPrefixBlocks, capacityOf(c.w)) {
			freed = true
		}
	}
	if !in || freed {
		return false
	}
	for i := range cs {
		c := &cs[i]
		c.away = c.eligible && !s.holds(c.DeviceBlocks, c.BookedPrefixBlocks)
	}
	return true
}

// awayMask is markAway on the fast path, over the fast scratch's overlap and booked prefixes
// and the tracker's counters by ordinal, elig the allowed mask (nil: every rank): the ranks the
// picker skips, or nil when the rule does not hold.
func (f *fastScratch) awayMask(p *partition, s stickiness, elig []bool) []bool {
	in, freed := false, false
	for i := range p.cands {
		if elig != nil && !elig[i] {
			continue
		}
		if s.holds(f.ov[i][0], int(f.booked[i])) {
			in = true
		} else if !freed {
			_, active, _, pending, _ := p.tracker.CountersAt(i)
			freed = s.frees(pending, active, int(f.booked[i]), p.cands[i].kvBlocks)
		}
	}
	if !in || freed {
		return nil
	}
	m := resize(f.away, len(p.cands))
	f.away = m
	for i := range m {
		m[i] = (elig == nil || elig[i]) && !s.holds(f.ov[i][0], int(f.booked[i]))
	}
	return m
}

// capacityOf is a worker's registered total_kv_blocks (per rank), 0 when unknown.
func capacityOf(w *worker) uint64 {
	if w == nil {
		return 0
	}
	return deref(w.spec.TotalKVBlocks, 0)
}
