package load

import (
	"cmp"
	"math"
	"slices"
)

// PrefixEntry is one owner's result in a PrefixMatch: Blocks is the length of
// the longest prefix of the query whose blocks are all live on Owner.
type PrefixEntry struct {
	Owner  Owner
	Blocks int
}

// PrefixMatch receives the result of Tracker.ActivePrefix. The zero value is
// ready to use. Reuse one PrefixMatch across calls: its buffers are kept, so
// steady-state calls do not allocate. A PrefixMatch belongs to one caller at
// a time and its contents are valid until it is passed to ActivePrefix again.
type PrefixMatch struct {
	entries []PrefixEntry
	found   []found
	dense   []uint32 // by owner slot, used by prefixDense
}

// found is a result before sorting: the owner's ordinal (position in
// Tracker.order) and its prefix length.
type found struct {
	ord    uint32
	blocks int
}

// Len returns the number of owners with a non-empty live prefix.
func (m *PrefixMatch) Len() int { return len(m.entries) }

// At returns the i-th entry; entries are sorted by (Worker, Rank).
func (m *PrefixMatch) At(i int) PrefixEntry { return m.entries[i] }

// Entries returns the entries sorted by (Worker, Rank). The slice aliases
// m's buffer: read it, don't keep it past the next ActivePrefix.
func (m *PrefixMatch) Entries() []PrefixEntry { return m.entries }

// Blocks returns o's live prefix length, 0 when o is not listed.
// Cost O(log Len).
func (m *PrefixMatch) Blocks(o Owner) int {
	i, ok := slices.BinarySearchFunc(m.entries, o, func(e PrefixEntry, o Owner) int {
		return e.Owner.Compare(o)
	})
	if !ok {
		return 0
	}
	return m.entries[i].Blocks
}

// Reset empties m, keeping its buffers.
func (m *PrefixMatch) Reset() {
	m.entries = m.entries[:0]
	m.found = m.found[:0]
}

// ActivePrefix fills m with, for each owner, the length of the longest prefix
// of hashes whose blocks are live on that owner (blocks of that prefix cost
// the owner nothing extra if the request is booked there). Owners with 0 are
// omitted; entries are sorted by (Worker, Rank). A nil m is ignored.
//
// Cost: one hash-map lookup per trie edge on the matched path, a comparison
// per matched hash, and O(entries of the nodes met) — plus, when the first
// node is held by denseMin owners or more, one pass over all owners to
// order the answer. No allocation once m's buffers have grown.
func (t *Tracker) ActivePrefix(hashes []uint64, m *PrefixMatch) {
	if m == nil {
		return
	}
	m.Reset()
	if len(hashes) == 0 {
		return
	}
	n := t.child(nilNode, hashes[0])
	if n == nilNode {
		return
	}
	// Every owner met holds the first node, so its entry count bounds the
	// answer's size and picks the strategy.
	if len(t.nodes[n].ents) >= denseMin {
		t.prefixDense(hashes, n, m)
	} else {
		t.prefixSparse(hashes, n, m)
	}
}

// denseMin is the answer size from which ActivePrefix records lengths in a
// per-slot array and orders them with one pass over all owners, instead of
// collecting (owner, length) pairs and sorting them (k·log k compares).
const denseMin = 32

// walk advances from node n (whose first hash equals hashes[pos]) as far as
// hashes match: it returns the position after n's matched part and the next
// node to visit (nilNode when the walk ends at n).
func (t *Tracker) walk(hashes []uint64, pos int, n uint32) (int, uint32) {
	edge := t.nodes[n].edge
	k := commonPrefix(edge, hashes[pos:])
	pos += k
	if k < len(edge) || pos == len(hashes) {
		return pos, nilNode
	}
	return pos, t.child(n, hashes[pos])
}

// prefixSparse collects (ordinal, length) pairs for few owners. Along the
// path, the owners of a child are a subset of its parent's; an owner's
// length is fixed where it drops out.
func (t *Tracker) prefixSparse(hashes []uint64, n uint32, m *PrefixMatch) {
	pos := 0
	for {
		var next uint32
		pos, next = t.walk(hashes, pos, n)
		ents := t.nodes[n].ents
		if next == nilNode {
			for _, e := range ents {
				m.found = append(m.found, found{t.ord[e.slot], pos})
			}
			break
		}
		// Equal sizes mean equal sets (the common case of a node split
		// where a booking ended): nobody drops out. Otherwise both lists are
		// sorted by slot: one merge pass finds those that drop out.
		ce := t.nodes[next].ents
		if len(ce) != len(ents) {
			j := 0
			for _, e := range ents {
				for j < len(ce) && ce[j].slot < e.slot {
					j++ // unreachable while the subset invariant holds
				}
				if j < len(ce) && ce[j].slot == e.slot {
					j++
					continue
				}
				m.found = append(m.found, found{t.ord[e.slot], pos})
			}
		}
		n = next
	}
	slices.SortFunc(m.found, func(a, b found) int { return cmp.Compare(a.ord, b.ord) })
	for _, f := range m.found {
		m.entries = append(m.entries, PrefixEntry{Owner: t.ids[f.ord], Blocks: f.blocks})
	}
}

// prefixDense records lengths by owner slot: every node on the path writes
// its matched end for all its owners, and deeper nodes overwrite the owners
// that go on (a subset). A node whose child has as many owners (hence the
// same ones) skips its writes. One pass over the owners in order emits the
// answer.
func (t *Tracker) prefixDense(hashes []uint64, n uint32, m *PrefixMatch) {
	m.dense = slices.Grow(m.dense[:0], len(t.owners))[:len(t.owners)]
	clear(m.dense)
	dense := m.dense
	pos := 0
	for {
		var next uint32
		pos, next = t.walk(hashes, pos, n)
		ents := t.nodes[n].ents
		if next == nilNode || len(t.nodes[next].ents) != len(ents) {
			p := uint32(min(pos, math.MaxUint32))
			for _, e := range ents {
				dense[e.slot] = p
			}
		}
		if next == nilNode {
			break
		}
		n = next
	}
	for i, slot := range t.order {
		if b := dense[slot]; b != 0 {
			m.entries = append(m.entries, PrefixEntry{Owner: t.ids[i], Blocks: int(b)})
		}
	}
}
