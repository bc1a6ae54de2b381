package engine

// The partition's registered KV capacity: the window of its tracker's cache heat
// (load/heat.go), which the kvselect policy's cold-cache discount reads (kvselect_eviction.go).
// It is kept as a running tally over the candidates, updated where cands is spliced (a
// registration costs O(its ranks), not O(partition)).

// capTally sums the candidates' registered total_kv_blocks; missing counts the candidates that
// registered none, and sizes how many registered each distinct capacity (a partition holds a
// few: one per GPU and model shape), so that the smallest is O(distinct sizes) after any splice.
type capTally struct {
	blocks  uint64
	missing int
	sizes   map[uint64]int
}

// tally adds (add true) or removes cs's capacities.
func (t *capTally) tally(cs []candidate, add bool) {
	for _, c := range cs {
		switch {
		case c.kvBlocks == 0 && add:
			t.missing++
		case c.kvBlocks == 0:
			t.missing--
		case add:
			t.blocks += c.kvBlocks
			if t.sizes == nil {
				t.sizes = map[uint64]int{}
			}
			t.sizes[c.kvBlocks]++
		default:
			t.blocks -= c.kvBlocks
			if t.sizes[c.kvBlocks]--; t.sizes[c.kvBlocks] <= 0 {
				delete(t.sizes, c.kvBlocks)
			}
		}
	}
}

// smallest is the smallest registered capacity, 0 when no candidate registered one. The
// minimum does not depend on the map's order.
func (t *capTally) smallest() uint64 {
	s := uint64(0)
	for size := range t.sizes {
		if s == 0 || size < s {
			s = size
		}
	}
	return s
}

// syncFillScales sets the fillScale of the candidates spliced in at cands[lo:hi] (all of them
// when the partition's smallest capacity changed, which rescales every rank): the eviction
// term's occupancy in blocks of the smallest cache (fillScales, kvselect_eviction.go).
func (p *partition) syncFillScales(lo, hi int) {
	if s := p.capacity.smallest(); s != p.smallestKV {
		p.smallestKV, lo, hi = s, 0, len(p.cands)
	}
	fillScales(p.cands[lo:hi], p.smallestKV)
}

// syncHeatWindow sets the tracker's heat window to the partition's KV capacity in tokens, or
// turns heat tracking off while any candidate's capacity is unknown (or there are none).
func (p *partition) syncHeatWindow() {
	w := 0.0
	if p.capacity.missing == 0 && p.capacity.blocks > 0 {
		w = float64(p.capacity.blocks) * float64(p.blockSize)
	}
	p.tracker.SetHeatWindow(w)
}
