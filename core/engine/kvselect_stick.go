package engine

// Cache stickiness, the kvselect policy's rule for where a mostly cached prompt may go
// (Config.CacheStickShare, default 0.3). When some eligible rank holds at least that share of the
// request's prompt blocks — in the index or booked there by a live request, the cached blocks
// the cost counts — the default picker chooses among the ranks that do, by cost, and admits a
// rank outside them only if it has room for the prompt in its KV cache (its active blocks plus
// the request's unbooked ones within its total_kv_blocks, or capacity not registered) and either
// has no prefill pending or costs less than the best sticky rank divided by stickMoveFactor
// (1.5). Below the share the cost alone decides, over every eligible rank.
//
// Why a rule and not another price. A move off a rank's cache pays only with capacity that would
// otherwise go unused. While every rank is busy, moving a conversation from its rank to a
// slightly shorter queue relocates waiting and adds the recompute of its context, which the
// fleet pays in throughput; on a full cache the copy it stores evicts another session's, which
// then misses too. The cost prices that recompute as (1 + β) times its work with β capped (4),
// and as a linear price it loses to the queue differences an overloaded fleet builds: tens of
// seconds between ranks against a few seconds of recompute. Uncapping β (tried, README "Cache
// stickiness") makes every prompt dearer alike, including prompts cached nowhere. The rule
// keeps the cost where it is informed — among the ranks holding the prompt, and for a rank with
// room that is idle (a hot prefix too big for its ranks needs a new replica) or far cheaper (the
// sticky ranks are overloaded against the fleet, which is when SGLang's router too lifts its
// cache affinity, at the same relative imbalance) — and removes the moves that can only add
// work: to a rank without room, whose pinned blocks would make it wait or preempt, or between
// busy ranks for a small gain.
//
// The share is SGLang's cache-aware router default (cache_threshold 0.3, which routes by cache
// above it): below it a prompt is mostly new work wherever it goes. ½ did as well on the
// simulator's matrices and worse on long agentic sessions, whose older copies of a context a
// lower share keeps in the sticky set (README, "Cache stickiness", with every measurement).
//
// Only the default picker applies the rule, on both selection paths identically; a custom Picker
// sees every eligible candidate and its cost.

// stickMoveFactor is how much cheaper a rank outside the sticky set must be than the best
// rank in it to take the request while busy: SGLang's router lifts its cache affinity at the
// same relative imbalance (balance_rel_threshold 1.5).
const stickMoveFactor = 1.5

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

// room reports whether a rank with active blocks, booked of the request's blocks live there,
// and capacity kvBlocks (0 = not registered: room assumed) can pin the prompt.
func (s stickiness) room(active uint64, booked int, kvBlocks uint64) bool {
	return kvBlocks == 0 || float64(active)+s.blocks-float64(booked) <= float64(kvBlocks)
}

// takes reports whether a rank outside the sticky set may take the request, given the best
// sticky rank's cost best: it has room, and either no prefill pending or a cost below
// best / stickMoveFactor.
func (s stickiness) takes(cost, best float64, pending int, active uint64, booked int, kvBlocks uint64) bool {
	if !s.room(active, booked, kvBlocks) {
		return false
	}
	return pending == 0 || (best > 0 && float64(cost*stickMoveFactor) < best)
}

// markAway applies the rule on the general path, after the costs: it sets away on every
// eligible candidate the rule keeps from the request and clears it everywhere else, and reports
// whether it kept any. pick skips away candidates.
func markAway(cs []scored, s stickiness) bool {
	best, in := 0.0, false
	for i := range cs {
		c := &cs[i]
		c.away = false
		if c.eligible && s.holds(c.DeviceBlocks, c.BookedPrefixBlocks) && (!in || c.cost < best) {
			best, in = c.cost, true
		}
	}
	if !in {
		return false
	}
	held := false
	for i := range cs {
		c := &cs[i]
		if c.eligible && !s.holds(c.DeviceBlocks, c.BookedPrefixBlocks) &&
			!s.takes(c.cost, best, c.Load.PendingPrefills, c.Load.ActiveBlocks, c.BookedPrefixBlocks, capacityOf(c.w)) {
			c.away, held = true, true
		}
	}
	return held
}

// awayMask is markAway on the fast path, over the fast scratch's overlap, booked prefixes and
// costs and the tracker's counters by ordinal, elig the allowed mask (nil: every rank): the
// ranks the picker skips, or nil when it skips none.
func (f *fastScratch) awayMask(p *partition, s stickiness, elig []bool) []bool {
	best, in := 0.0, false
	for i, c := range f.cost {
		if (elig == nil || elig[i]) && s.holds(f.ov[i][0], int(f.booked[i])) && (!in || c < best) {
			best, in = c, true
		}
	}
	if !in {
		return nil
	}
	var m []bool
	for i, c := range f.cost {
		if (elig != nil && !elig[i]) || s.holds(f.ov[i][0], int(f.booked[i])) {
			continue
		}
		_, active, _, pending, _ := p.tracker.CountersAt(i)
		if s.takes(c, best, pending, active, int(f.booked[i]), p.cands[i].kvBlocks) {
			continue
		}
		if m == nil {
			m = resize(f.away, len(f.cost))
			f.away = m
			clear(m)
		}
		m[i] = true
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
