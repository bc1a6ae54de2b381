package load

import "math"

// Insertion heat: how much new KV each owner has been asked to store lately, the signal behind
// the kvselect policy's cold-cache discount (engine/kvselect_eviction.go).
//
// A worker's cache evicts its least recently used blocks to store new ones, so the blocks a
// placement would push out are those at the tail of its LRU order, and how long ago they were
// last used is set by how fast the worker takes in new blocks: a cache of C blocks that stores r
// blocks per second keeps a block about C/r seconds after its last use (the characteristic time
// of an LRU cache). An owner that has been booked little uncached work lately holds, at its
// tail, blocks nobody has asked for in a long while; evicting them costs little.
//
// The heat of an owner is the uncached prefill tokens booked on it (Booking.PrefillTokens, the
// blocks it is about to store), each decayed by exp(−v/W), where v is the uncached tokens booked
// on the whole tracker since and W the heat window (SetHeatWindow: the partition's registered KV
// capacity in tokens). The clock is the partition's insertion volume, not time: the heat then
// covers about one turnover of the fleet's caches whatever the load, and there is no time
// constant to choose. Heats are only compared with each other (an owner's against the mean), so
// they are kept scaled by a common factor exp(E), E = Σ f/W over the insertions so far: an
// insertion adds f·exp(E) to its owner and nothing else changes; the others decay implicitly.
// E is reset, and every heat rescaled, when it passes heatRescaleAt (O(owners) once per that
// many windows of insertions). A window change only changes later increments of E.
//
// Cost: one exp per booking with uncached tokens; reads are O(1).

// heatRescaleAt bounds E: exp(500) ≈ 1.4e217, so a heat stays finite (a booking adds at most
// 2^64 tokens · exp(500) ≈ 2.6e236, and a sum over 10^70 of them still fits a float64).
const heatRescaleAt = 500

// SetHeatWindow sets the heat window W in tokens (see above); W ≤ 0 or NaN stops heat tracking
// (InsertionHeatAt then returns 0 for every owner) until a positive window is set. Heats
// learned so far are kept.
func (t *Tracker) SetHeatWindow(tokens float64) {
	if !(tokens > 0) || math.IsInf(tokens, 0) {
		tokens = 0
	}
	t.heatW = tokens
}

// HeatWindow returns the window set by SetHeatWindow (0: heat tracking off).
func (t *Tracker) HeatWindow() float64 { return t.heatW }

// heatInsert books tokens of new KV on st's insertion heat.
func (t *Tracker) heatInsert(st *ownerState, tokens uint64) {
	if !(t.heatW > 0) || tokens == 0 {
		return
	}
	f := float64(tokens)
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

// InsertionHeatAt returns the insertion heat of the owner at ordinal i, in the tracker's common
// scale (comparable with other owners' at the same moment only), 0 out of range or with heat
// tracking off. O(1).
func (t *Tracker) InsertionHeatAt(i int) float64 {
	if uint(i) >= uint(len(t.order)) || !(t.heatW > 0) {
		return 0
	}
	return t.owners[t.order[i]].heat
}
