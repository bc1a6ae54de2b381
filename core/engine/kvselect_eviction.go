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

// kvCapacity is the worker's registered total_kv_blocks per rank, 0 when unknown.
func (w *worker) kvCapacity() uint64 { return deref(w.spec.TotalKVBlocks, 0) }

// occupancy is a rank's cache occupancy in [0, 1] from its indexed blocks and capacity (0 =
// unknown: relative to the fullest rank, maxEntries).
func occupancy(entries int32, capacity uint64, maxEntries int32) float64 {
	switch {
	case capacity > 0:
		return min(1, float64(entries)/float64(capacity))
	case maxEntries > 0:
		return float64(entries) / float64(maxEntries)
	}
	return 0
}

// occupancies returns, per candidate of p, the rank's occupancy for the fast path (all zeros
// when the eviction term is off), having fed every rank's indexed blocks to k. Scratch, valid
// until the next selection.
func (e *Engine) occupancies(p *partition, w weights, k *kvselectTerms) []float64 {
	f := &e.scratch.fast
	occ := resize(f.occ, len(p.cands))
	f.occ = occ
	clear(occ)
	if !(w.eviction > 0) {
		return occ
	}
	ent := e.entriesOf(p, w)
	for _, n := range ent {
		k.observeEntries(n)
	}
	for i := range occ {
		occ[i] = occupancy(ent[i], p.cands[i].w.kvCapacity(), k.maxEntries)
	}
	return occ
}
