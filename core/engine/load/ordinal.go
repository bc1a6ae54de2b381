package load

import (
	"math"

	"github.com/kvselect/kvselect/kvwire"
)

// Ordinal access: the selection hot path of the engine scores every owner of a
// partition on every request. Instead of copying every owner's RankLoad and
// merging sorted owner lists, it addresses owners by ordinal — an owner's
// position in (Worker, Rank) order, the order of Loads and of PrefixMatch
// entries — and keeps its own candidate arrays in the same order.
//
// Ordinals are dense (0 ≤ ordinal < Owners()) and stay valid exactly as long
// as Version is unchanged: only AddOwner of a new owner and RemoveOwner of a
// known one renumber them. Bookings, prefill completion, output blocks, frees
// and expiry never move an ordinal.
//
// Like every Tracker method these are single-threaded reads: the caller
// serialises them with the mutators.

// Version returns a counter that changes whenever the owner set (and so the
// ordinal numbering) changes. A caller that cached ordinals compares it
// before reusing them.
func (t *Tracker) Version() uint64 { return t.version }

// OwnerAt returns the owner at ordinal i, and false when i is out of range.
func (t *Tracker) OwnerAt(i int) (kvwire.Owner, bool) {
	if uint(i) >= uint(len(t.ids)) {
		return kvwire.Owner{}, false
	}
	return t.ids[i], true
}

// LoadAt returns the load of the owner at ordinal i (equal to Load(OwnerAt(i))
// and to Loads()[i]); out of range it returns the zero RankLoad. Cost O(1),
// no allocation.
func (t *Tracker) LoadAt(i int) RankLoad {
	if uint(i) >= uint(len(t.order)) {
		return RankLoad{}
	}
	return t.loadOf(t.order[i])
}

// CountersAt returns the fields of LoadAt(i) but the owner, as separate values: prefill is
// ActivePrefillTokens, blocks ActiveBlocks, requests ActiveRequests, pending PendingPrefills and
// squares PrefillSquares. Out of range all are zero.
//
// It exists for per-owner loops: it inlines, and its results stay in registers (a RankLoad,
// with more than four fields, is built in memory, and copying it field by field then as a whole
// defeats store forwarding), while results a caller does not use are never computed.
func (t *Tracker) CountersAt(i int) (prefill, blocks uint64, requests, pending int, squares uint64) {
	if uint(i) >= uint(len(t.order)) {
		return 0, 0, 0, 0, 0
	}
	st := &t.owners[t.order[i]]
	return st.prefill, roundBlocks(st.weight), len(st.bookings), st.pending, st.squares
}

// ActivePrefixOrdinals is ActivePrefix answered by ordinal: it returns dst
// resized to Owners() entries (reusing its capacity), where entry i is the
// live prefix length of the owner at ordinal i, 0 for owners not met, capped at
// MaxUint32. It allocates only when dst lacks capacity.
//
// Cost: the walk of ActivePrefix (one hash-map lookup per trie edge on the
// matched path), one clear of dst, and one write per entry of each node where
// some owner's prefix ends; no sorting and no merge. Deeper nodes overwrite
// the lengths written at shallower ones: a child's owners are a subset of its
// parent's, so the last write for an owner is its deepest node.
func (t *Tracker) ActivePrefixOrdinals(hashes []uint64, dst []uint32) []uint32 {
	n := len(t.order)
	if cap(dst) < n {
		dst = make([]uint32, n)
	} else {
		dst = dst[:n]
		clear(dst)
	}
	if len(hashes) == 0 {
		return dst
	}
	nd := t.child(nilNode, hashes[0])
	if nd == nilNode {
		return dst
	}
	pos := 0
	for {
		cur := &t.nodes[nd]
		k := commonPrefix(cur.edge, hashes[pos:])
		pos += k
		var next uint32
		if k == len(cur.edge) && pos < len(hashes) {
			next = t.child(nd, hashes[pos])
		}
		// Equal entry counts mean equal owner lists (a child's owners are a
		// subset of its parent's): nobody stops here, the child rewrites all.
		if next == nilNode || len(t.nodes[next].ents) != len(cur.ents) {
			p := uint32(min(pos, math.MaxUint32))
			for _, e := range cur.ents {
				if o := t.ord[e.slot]; int(o) < n {
					dst[o] = p
				}
			}
		}
		if next == nilNode {
			return dst
		}
		nd = next
	}
}

// CrossAt returns PrefillCross of the owner at ordinal i (0 out of range). Cost O(1).
func (t *Tracker) CrossAt(i int) uint64 {
	if uint(i) >= uint(len(t.order)) {
		return 0
	}
	return t.owners[t.order[i]].cross
}

// ContextTokensAt is the ContextTokens of the owner at ordinal i (RankLoad.ContextTokens), 0 out
// of range. O(1).
func (t *Tracker) ContextTokensAt(i int) uint64 {
	if uint(i) >= uint(len(t.order)) {
		return 0
	}
	return t.owners[t.order[i]].contexts
}
