package load

import (
	"math"
	"slices"

	"github.com/kvselect/kvselect/kvwire"
)

// PrefixEntry is one owner's result in a PrefixMatch: Blocks is the length of
// the longest prefix of the query whose blocks are all live on Owner.
type PrefixEntry struct {
	Owner  kvwire.Owner
	Blocks int
}

// PrefixMatch receives the result of Tracker.ActivePrefix. The zero value is
// ready to use. Reuse one PrefixMatch across calls: its buffers are kept, so
// steady-state calls do not allocate. A PrefixMatch belongs to one caller at
// a time and its contents are valid until it is passed to ActivePrefix again.
type PrefixMatch struct {
	entries []PrefixEntry
	found   []found  // results in runs, each sorted by owner ordinal
	runs    []int    // end offset in found of each run
	tmp     []found  // merge scratch
	byOrd   []uint32 // dense answers: prefix length by owner ordinal
	dense   bool     // the last call used byOrd
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
func (m *PrefixMatch) Blocks(o kvwire.Owner) int {
	i, ok := slices.BinarySearchFunc(m.entries, o, func(e PrefixEntry, o kvwire.Owner) int {
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
	m.runs = m.runs[:0]
}

// ActivePrefix fills m with, for each owner, the length of the longest prefix
// of hashes whose blocks are live on that owner (blocks of that prefix cost
// the owner nothing extra if the request is booked there). Owners with 0 are
// omitted; entries are sorted by (Worker, Rank). A nil m is ignored.
//
// Cost: one hash-map lookup per trie edge on the matched path, one
// comparison per matched hash, plus, for the answer, either O(owners met ×
// nodes where some drop out) or, when the first node is held by at least a
// quarter of the partition's owners, one pass over all owners. No allocation
// once m's buffers have grown.
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
	// answer's size and picks the cheaper way to order it.
	m.dense = 4*len(t.nodes[n].ents) >= len(t.order)
	if m.dense {
		m.byOrd = slices.Grow(m.byOrd[:0], len(t.order))[:len(t.order)]
		clear(m.byOrd)
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
			m.stop(t, nd.ents, nil, pos)
			break
		}
		// next's owners are a subsequence of nd's (same order); equal
		// lengths mean equal lists (the common case of a node split where
		// a booking ended) and nobody drops out here.
		if ce := t.nodes[next].ents; len(ce) != len(nd.ents) {
			m.stop(t, nd.ents, ce, pos)
		}
		n = next
	}
	if m.dense {
		m.finishDense(t)
	} else {
		m.finishRuns(t)
	}
}

// stop records prefix length pos for the owners of ents that are not in sub
// (a subsequence of ents): by ordinal in byOrd (dense), or as one run of
// m.found sorted by ordinal.
func (m *PrefixMatch) stop(t *Tracker, ents, sub []entry, pos int) {
	if m.dense {
		// Owners that go on are overwritten by a deeper node: write all.
		p := uint32(min(pos, math.MaxUint32))
		for _, e := range ents {
			m.byOrd[t.ord[e.slot]] = p
		}
		return
	}
	m.run(t, ents, sub, pos)
}

// finishDense emits byOrd's non-zero lengths in owner order: one pass over
// all owners, written into a presized buffer.
func (m *PrefixMatch) finishDense(t *Tracker) {
	out := slices.Grow(m.entries[:0], len(t.ids))[:len(t.ids)]
	k := 0
	for ord, b := range m.byOrd[:len(t.ids)] {
		if b != 0 {
			out[k] = PrefixEntry{Owner: t.ids[ord], Blocks: int(b)}
			k++
		}
	}
	m.entries = out[:k]
}

// run appends, as one run sorted by owner, the owners of ents that are not
// in sub (a subsequence of ents), all with prefix length pos.
func (m *PrefixMatch) run(t *Tracker, ents, sub []entry, pos int) {
	start := len(m.found)
	j := 0
	for _, e := range ents {
		if j < len(sub) && sub[j].slot == e.slot {
			j++
			continue
		}
		m.found = append(m.found, found{t.ord[e.slot], pos})
	}
	if len(m.found) > start {
		m.runs = append(m.runs, len(m.found))
	}
}

// finishRuns merges the sorted runs of m.found (one per node where owners
// dropped out; usually a handful) into m.entries in owner order. Cost
// O(found × runs), no comparison sort.
func (m *PrefixMatch) finishRuns(t *Tracker) {
	for r := 1; r < len(m.runs); r++ {
		mid, end := m.runs[r-1], m.runs[r]
		if m.found[mid-1].ord < m.found[mid].ord {
			continue // already in order
		}
		m.tmp = append(m.tmp[:0], m.found[:mid]...)
		a, b, out := 0, mid, 0
		for a < len(m.tmp) && b < end {
			if m.tmp[a].ord < m.found[b].ord {
				m.found[out] = m.tmp[a]
				a++
			} else {
				m.found[out] = m.found[b]
				b++
			}
			out++
		}
		out += copy(m.found[out:], m.tmp[a:])
		// The rest of the run is already in place.
	}
	out := slices.Grow(m.entries[:0], len(m.found))[:len(m.found)]
	ids := t.ids
	for i, f := range m.found {
		out[i] = PrefixEntry{Owner: ids[f.ord], Blocks: f.blocks}
	}
	m.entries = out
}
