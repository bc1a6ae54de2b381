package load

import (
	"cmp"
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
	dense   []int // by owner ordinal, used by emit for large results
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
// Cost: one hash-map lookup per trie edge on the matched path plus
// O(len(hashes) + entries of the nodes met); no allocation once m's buffers
// have grown.
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
	pos := 0
	for {
		nd := &t.nodes[n]
		k := commonPrefix(nd.edge, hashes[pos:])
		pos += k
		var next uint32
		if k == len(nd.edge) && pos < len(hashes) {
			next = t.child(n, hashes[pos])
		}
		if next == nilNode {
			// Every owner of this node reaches pos and no further.
			for _, e := range nd.ents {
				m.found = append(m.found, found{t.ord[e.slot], pos})
			}
			break
		}
		// The owners of next are a subset of nd's; the others stop at pos.
		// Equal lengths mean equal sets (the common case of a node split
		// where a booking ended): nobody stops. Otherwise both lists are
		// sorted by slot: one merge pass.
		ce := t.nodes[next].ents
		if len(ce) == len(nd.ents) {
			n = next
			continue
		}
		j := 0
		for _, e := range nd.ents {
			for j < len(ce) && ce[j].slot < e.slot {
				j++ // unreachable while the subset invariant holds
			}
			if j < len(ce) && ce[j].slot == e.slot {
				j++
				continue
			}
			m.found = append(m.found, found{t.ord[e.slot], pos})
		}
		n = next
	}
	m.emit(t)
}

// denseSortMin is the result size from which emit orders the results with a
// pass over all owners instead of a comparison sort.
const denseSortMin = 32

// emit orders m.found by owner and fills m.entries: a comparison sort for
// few results, a counting pass over every owner ordinal for many (the sort
// would cost k·log k compares; the pass costs one step per owner).
func (m *PrefixMatch) emit(t *Tracker) {
	if len(m.found) < denseSortMin {
		slices.SortFunc(m.found, func(a, b found) int { return cmp.Compare(a.ord, b.ord) })
		for _, f := range m.found {
			m.entries = append(m.entries, PrefixEntry{Owner: t.owners[t.order[f.ord]].id, Blocks: f.blocks})
		}
		return
	}
	m.dense = slices.Grow(m.dense[:0], len(t.order))[:len(t.order)]
	clear(m.dense)
	for _, f := range m.found {
		m.dense[f.ord] = f.blocks
	}
	for ord, b := range m.dense {
		if b > 0 {
			m.entries = append(m.entries, PrefixEntry{Owner: t.owners[t.order[ord]].id, Blocks: b})
		}
	}
}
