package load

import "math"

// Cache heat: how much each owner's KV cache has been used lately, the signal behind the kvselect
// policy's cold-cache discount (engine/kvselect_eviction.go).
//
// A worker's cache evicts its least recently used blocks to store new ones. What those blocks are
// worth depends on whether anyone still uses that cache: a worker whose cache requests keep
// reading (hits) and writing (misses) holds blocks in use, while one that few requests reach
// holds, at the tail of its LRU order, blocks nobody has asked for in a long while; evicting
// them costs little. The router sees every request it sends, so it can tell the two apart
// without any worker report.
//
// The heat of an owner is the prompt tokens booked on it — cached (Booking.ContextTokens, the
// blocks the request reads) and uncached (PrefillTokens, the blocks it stores) — each decayed by
// exp(−v/W), where v is the prompt tokens booked on the whole tracker since and W the heat window
// (SetHeatWindow: the partition's registered KV capacity in tokens). The clock is the partition's
// traffic, not time: the heat covers about one fleet's capacity worth of prompts whatever the
// load, and there is no time constant to choose. Heats are only compared with each other (an
// owner's against the mean), so they are kept scaled by a common factor exp(E), E = Σ f/W over
// the bookings so far: a booking adds f·exp(E) to its owner and nothing else changes; the others
// decay implicitly. E is reset, and every heat rescaled, when it would pass heatRescaleAt
// (O(owners) once per that many windows of traffic). A window change only changes later
// increments of E.
//
// Measured against counting stored (uncached) tokens only: a worker serving a hot prompt's hits
// stores little, so it read as cold and its misses were discounted; that passed fewer cells of
// the robustness matrices (README, "A cache nobody uses").
//
// Cost: one exp per booking; reads are O(1).

// heatRescaleAt bounds E: exp(500) ≈ 1.4e217, so a heat stays finite (a booking adds at most
// 2^65 tokens · exp(500) ≈ 5.2e236, and a sum over 10^70 of them still fits a float64).
const heatRescaleAt = 500

// SetHeatWindow sets the heat window W in tokens (see above); W ≤ 0, NaN or infinite stops heat
// tracking (CacheHeatAt then returns 0 for every owner) until a positive window is set. Heats
// learned so far are kept.
func (t *Tracker) SetHeatWindow(tokens float64) {
	if !(tokens > 0) || math.IsInf(tokens, 0) {
		tokens = 0
	}
	t.heatW = tokens
}

// HeatWindow returns the window set by SetHeatWindow (0: heat tracking off).
func (t *Tracker) HeatWindow() float64 { return t.heatW }

// heatBook adds a booking of read cached and stored uncached prompt tokens to st's heat.
func (t *Tracker) heatBook(st *ownerState, read, stored uint64) {
	f := float64(read) + float64(stored)
	if !(t.heatW > 0) || !(f > 0) {
		return
	}
	t.heatE += f / t.heatW
	if t.heatE > heatRescaleAt {
		// Rescale before adding, so that exp(E) never exceeds exp(heatRescaleAt). A booking
		// of more than that many windows underflows every earlier heat to 0, as it should.
		s := math.Exp(-t.heatE)
		for i := range t.owners {
			t.owners[i].heat *= s
		}
		t.heatE = 0
	}
	st.heat += f * math.Exp(t.heatE)
}

// CacheHeatAt returns the cache heat of the owner at ordinal i, in the tracker's common scale
// (comparable with other owners' at the same moment only), 0 out of range or with heat tracking
// off. O(1).
func (t *Tracker) CacheHeatAt(i int) float64 {
	if uint(i) >= uint(len(t.order)) || !(t.heatW > 0) {
		return 0
	}
	return t.owners[t.order[i]].heat
}
