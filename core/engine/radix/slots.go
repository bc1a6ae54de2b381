package radix

import "github.com/kvselect/kvselect/kvwire"

// Slot-addressed matching, for callers that keep their own per-owner arrays (the engine's
// selection fast path keeps one overlap record per schedulable rank). Instead of a sorted
// OwnerMatch list that the caller would merge with its own owner list, MatchSlots scatters each
// owner's counts straight into the caller's array through a rank → slot table the caller builds
// once per owner-set change:
//
//	for r := 0; r < ix.Owners(); r++ { o, _ := ix.OwnerAt(r); slot[r] = callerIndexOf(o) or -1 }
//
// Ranks are owners' positions in (Worker, Rank) order among the owners holding at least one
// block. They stay valid while Version is unchanged: only an owner's first stored block and
// the removal of its last one change the owner set.
//
// Concurrency: as for Match, the caller serialises these calls with every other Index call.

// Counts is one owner's overlap by tier phase: Device, HostExt, DiskExt, ExternalExt (see
// OwnerMatch).
type Counts = [kvwire.NumTiers]int32

// Version returns a counter that changes whenever the set of owners (and so owner ranks)
// changes. A fresh Index starts at 0; a caller caching a slot table for one Index must also
// remember which Index it was built for.
func (ix *Index) Version() uint64 { return ix.own.version }

// Owners returns the number of owners holding at least one block (the ranks are 0..Owners()-1).
func (ix *Index) Owners() int { return ix.own.live() }

// OwnerAt returns the owner of rank r, and false when r is out of range.
func (ix *Index) OwnerAt(r int) (kvwire.Owner, bool) {
	if uint(r) >= uint(len(ix.own.sorted)) {
		return kvwire.Owner{}, false
	}
	return ix.own.byRank[r], true
}

// MatchSlots computes what Match computes and, for every owner with a non-zero overlap whose
// rank r has 0 ≤ slot[r] < len(dst), writes its non-zero counts into dst[slot[r]]. The caller
// must pass dst zeroed (all-zero entries stay zero for owners without overlap); owners whose rank
// is outside slot, or whose slot is negative or out of range, are skipped. m.Owners is left
// empty; m is only scratch here.
//
// Cost: Match's walk, writing each count straight into dst: no per-rank scratch to scan and
// clear, no sorting, no OwnerMatch records. No allocation once m has grown to the index's owner
// count.
func (ix *Index) MatchSlots(local []uint64, m *Match, slot []int32, dst []Counts) {
	if m == nil {
		return
	}
	m.Owners = m.Owners[:0]
	m.slot, m.dst = slot, dst
	if m.dst == nil {
		m.dst = []Counts{} // non-nil: route every count to the (empty) destination
	}
	ix.walk(local, m)
	m.slot, m.dst = nil, nil // keep no caller memory
}
