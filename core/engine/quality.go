package engine

// RoutingQuality measures, per partition, how much of the prefix cache the bookings actually
// used against what was there to use. For each booking (select_and_reserve) it adds the tokens
// matched on the device tier of the chosen rank (achieved) and the best device-tier match of any
// rank the request was eligible for (available); NotMaxOverlap counts bookings whose chosen rank
// matched less than that best. Achieved < available is not a defect by itself (load, session
// affinity and pins trade cache hits for balance), but a ratio that drifts down says the cost
// function leaves cache on the table. Counters are cumulative for the partition's lifetime.
type RoutingQuality struct {
	Bookings        uint64 `json:"bookings"`
	AchievedTokens  uint64 `json:"achieved_tokens"`
	AvailableTokens uint64 `json:"available_tokens"`
	NotMaxOverlap   uint64 `json:"not_max_overlap"`
}

// noteQuality records one booking's routing quality in its partition. On the fast path the
// per-rank overlap lives in the fast scratch (sel.fast), eligibility in sel.elig; on the general
// path in sel.cands. Cost: one pass over the partition's ranks, no allocation.
func (e *Engine) noteQuality(sel *selection) {
	if sel == nil || sel.pick == nil || sel.p == nil {
		return
	}
	chosen := max(sel.pick.DeviceBlocks, 0)
	best := chosen
	if sel.fast {
		for i, o := range e.scratch.fast.ov[:len(sel.p.cands)] {
			if (sel.elig == nil || sel.elig[i]) && o[0] > best {
				best = o[0]
			}
		}
	} else {
		for i := range sel.cands {
			if c := &sel.cands[i]; c.eligible && c.DeviceBlocks > best {
				best = c.DeviceBlocks
			}
		}
	}
	q := &sel.p.quality
	bs := uint64(sel.p.blockSize)
	q.Bookings++
	q.AchievedTokens += uint64(chosen) * bs
	q.AvailableTokens += uint64(best) * bs
	if chosen < best {
		q.NotMaxOverlap++
	}
}
