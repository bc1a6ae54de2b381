package engine

// RoutingQuality measures, per partition, how much of the prefix cache the bookings actually
// used against what was there to use. For each booking (select_and_reserve, and the replayed
// POST /reservations of a two-phase /select) it adds the tokens matched on the device tier of
// the chosen rank (achieved) and the best device-tier match of any rank the request was eligible
// for (available); NotMaxOverlap counts bookings whose chosen rank matched less than that best.
// Achieved < available is not a defect by itself (load, session affinity and pins trade cache
// hits for balance), but a ratio that drifts down says the cost function leaves cache on the
// table. StickyBookings counts the bookings from which the kvselect policy's cache stickiness
// kept at least one eligible rank (kvselect_stick.go), wherever the cost then placed them.
// Counters are cumulative for the partition's lifetime.
//
// Each booking is counted exactly once, when it books: a /select books nothing and counts
// nothing; its sample is measured then (the overlap it chose on) and kept in the pending entry,
// and counted by the replay that books it. A replay that is rejected counts nothing.
type RoutingQuality struct {
	Bookings        uint64 `json:"bookings"`
	AchievedTokens  uint64 `json:"achieved_tokens"`
	AvailableTokens uint64 `json:"available_tokens"`
	NotMaxOverlap   uint64 `json:"not_max_overlap"`
	StickyBookings  uint64 `json:"sticky_bookings"`
}

// qualitySample is one booking's contribution to RoutingQuality, measured on the overlap the
// choice was made on: device-tier tokens on the chosen rank, the best over the eligible ranks,
// whether the chosen rank fell short of that best, and whether cache stickiness kept a rank
// from it.
type qualitySample struct {
	achieved, available uint64 // tokens
	notMax, sticky      bool
}

// add counts one booking.
func (q *RoutingQuality) add(s qualitySample) {
	q.Bookings++
	q.AchievedTokens += s.achieved
	q.AvailableTokens += s.available
	if s.notMax {
		q.NotMaxOverlap++
	}
	if s.sticky {
		q.StickyBookings++
	}
}

// noteQuality records one booking's routing quality in its partition (select_and_reserve).
func (e *Engine) noteQuality(sel *selection) {
	if sel == nil || sel.pick == nil || sel.p == nil {
		return
	}
	sel.p.quality.add(e.measureQuality(sel))
}

// measureQuality is the routing-quality sample of a selection, valid only until the next
// selection (it reads scratch). On the fast path the per-rank overlap lives in the fast scratch
// (sel.fast), eligibility in sel.elig; on the general path in sel.cands. Cost: one pass over the
// partition's ranks, no allocation. sel.pick and sel.p must be set.
func (e *Engine) measureQuality(sel *selection) qualitySample {
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
	bs := uint64(sel.p.blockSize)
	return qualitySample{achieved: uint64(chosen) * bs, available: uint64(best) * bs, notMax: chosen < best, sticky: sel.stuck}
}
