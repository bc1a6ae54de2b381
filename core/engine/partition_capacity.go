package engine

// The partition's registered KV capacity: the window of its tracker's cache heat
// (load/heat.go), which the kvselect policy's cold-cache discount reads (kvselect_eviction.go).
// It is kept as a running tally over the candidates, updated where cands is spliced (a
// registration costs O(its ranks), not O(partition)).

// capTally sums the candidates' registered total_kv_blocks; missing counts the candidates that
// registered none.
type capTally struct {
	blocks  uint64
	missing int
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
		default:
			t.blocks -= c.kvBlocks
		}
	}
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
