package engine

// The eviction term of the kvselect policy (kvselect_cost.go): prefilling uncached tokens on a
// rank stores their blocks there, and on a rank whose cache is full that evicts as many blocks
// of other prompts — work someone recomputes later, in the common case that the evicted prefix
// comes back (a conversation's or an agent session's next turn). The term weighs a rank's own
// uncached prefill by its cache occupancy: the blocks the rank holds in the index (every tier)
// over its registered total_kv_blocks, or, for a worker that did not register it, over the
// most blocks any rank of the partition holds. New sessions then go where they displace the
// least (SGLang's router sends unmatched requests to the worker with the smallest tree for the
// same reason), and a conversation is not moved onto a rank whose cache it would churn.

// entriesOf returns, per candidate of p (tracker ordinal), the blocks the rank holds in the
// index: all zeros unless the kvselect policy's eviction term is on. The slice is scratch,
// valid until the next selection.
func (e *Engine) entriesOf(p *partition, w weights) []int32 {
	f := &e.scratch.fast
	ent := resize(f.entries, len(p.cands))
	f.entries = ent
	clear(ent)
	if w.kvselect && w.eviction > 0 {
		p.index.EntriesSlots(p.slotTable(), ent)
	}
	return ent
}

// invKVCapacity is 1/total_kv_blocks of the worker (per rank), 0 when unknown.
func (w *worker) invKVCapacity() float64 {
	if c := deref(w.spec.TotalKVBlocks, 0); c > 0 {
		return 1 / float64(c)
	}
	return 0
}

// occupancy is a rank's cache occupancy in [0, 1] from its indexed blocks and 1/capacity (0 =
// unknown: relative to the fullest rank, through invMax = 1/maxEntries, 0 when every rank is
// empty).
func occupancy(entries int32, invCap, invMax float64) float64 {
	if invCap > 0 {
		return min(1, float64(entries)*invCap)
	}
	return float64(entries) * invMax
}
