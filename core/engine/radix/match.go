package radix

import (
	"math/bits"
	"slices"
)

// OwnerMatch is one owner's overlap with a request, in blocks, under Mooncake "cumulative"
// semantics: Device consecutive blocks from the root held on device; then, from there, HostExt
// further blocks held in host_pinned; then DiskExt in disk; then ExternalExt in external.
// Cumulative views: host = Device+HostExt, disk = host+DiskExt+ExternalExt.
type OwnerMatch struct {
	Owner                                 Owner
	Device, HostExt, DiskExt, ExternalExt int32
}

// Match holds the result of Index.Match and the scratch space that makes repeated matches
// allocation-free. The zero value is ready to use; reuse one Match per goroutine.
type Match struct {
	// Owners with a non-zero overlap, sorted by Owner. Overwritten by the next Match call.
	Owners []OwnerMatch

	live  []liveOwner // owners still matching, sorted by owner index
	done  []doneOwner // finished owners, in finishing order
	slots []int32     // scratch indexed by owner rank; all -1 between calls
}

// liveOwner tracks one owner during the walk: it is in tier phase `phase` since block `start`;
// cnt holds the finished phases' counts.
type liveOwner struct {
	idx   uint32
	phase uint32
	start int32
	cnt   [NumTiers]int32
}

type doneOwner struct {
	rank uint32
	cnt  [NumTiers]int32
}

// Match walks local block hashes from the root and fills m.Owners with every owner's tiered
// overlap (see OwnerMatch); owners whose four counts are all zero are omitted.
//
// Per owner, at each node along the path: if it holds the node in its current phase's tier it
// continues; otherwise it moves to the next lower tier it holds the node in (earlier phases end);
// if it holds none, or is absent, it stops. At the first node each owner starts in the highest
// tier it holds there.
//
// Cost: O(path) table probes, plus O(owners) at the first node and at each node whose owner list
// differs from its parent's (a node whose (owner, tiers) list equals its parent's is crossed in
// O(1) via a cached flag), plus sorting the output. No allocation once m has grown.
func (ix *Index) Match(local []uint64, m *Match) {
	m.Owners = m.Owners[:0]
	m.live = m.live[:0]
	m.done = m.done[:0]
	cur := uint32(0)
	depth := int32(0)
	for i, h := range local {
		child := ix.children.get(cur, h)
		if child == 0 {
			break
		}
		if i == 0 {
			ix.matchStart(child, m)
		} else if !ix.sameAsParent(child) {
			ix.matchStep(child, int32(i), m)
		}
		if len(m.live) == 0 {
			break
		}
		cur = child
		depth = int32(i + 1)
	}
	for j := range m.live {
		ix.finish(&m.live[j], depth, m)
	}
	ix.emit(m)
}

// matchStart seeds the live set from the first node's entries.
func (ix *Index) matchStart(id uint32, m *Match) {
	keys := ix.keysOf(&ix.nodes[id])
	m.live = slices.Grow(m.live, len(keys))[:len(keys)]
	for j, k := range keys {
		m.live[j] = liveOwner{idx: ownerOf(k), phase: uint32(bits.TrailingZeros32(k | 1<<NumTiers))}
	}
	// Entries always have a tier bit, so no phase equals NumTiers; no filtering needed.
}

// matchStep advances the live set across node id (block index i): merge of two lists sorted by
// owner index, compacting survivors in place.
func (ix *Index) matchStep(id uint32, i int32, m *Match) {
	keys := ix.keysOf(&ix.nodes[id])
	live := m.live
	w := 0
	if len(keys) > 8*len(live) {
		// Few live owners against a long entry list: binary-search each.
		for r := range live {
			l := live[r]
			pos := ix.findEntry(&ix.nodes[id], l.idx)
			var k uint32
			if pos >= 0 {
				k = keys[pos]
			}
			if ix.advance(&l, k, i, m) {
				live[w] = l
				w++
			}
		}
	} else {
		j := 0
		for r := range live {
			l := live[r]
			for j < len(keys) && ownerOf(keys[j]) < l.idx {
				j++
			}
			var k uint32
			if j < len(keys) && ownerOf(keys[j]) == l.idx {
				k = keys[j]
			}
			if ix.advance(&l, k, i, m) {
				live[w] = l
				w++
			}
		}
	}
	m.live = live[:w]
}

// advance applies node key k (0 if the owner is absent) at block i to l; false means l finished.
func (ix *Index) advance(l *liveOwner, k uint32, i int32, m *Match) bool {
	if k&(1<<l.phase) != 0 {
		return true
	}
	higher := (k & tierMask) >> (l.phase + 1)
	if higher == 0 {
		ix.finish(l, i, m)
		return false
	}
	l.cnt[l.phase] = i - l.start
	l.phase += 1 + uint32(bits.TrailingZeros32(higher))
	l.start = i
	return true
}

// finish closes l's current phase at block i and records it if anything matched.
func (ix *Index) finish(l *liveOwner, i int32, m *Match) {
	l.cnt[l.phase] = i - l.start
	if l.cnt == [NumTiers]int32{} {
		return
	}
	m.done = append(m.done, doneOwner{rank: ix.own.list[l.idx].rank, cnt: l.cnt})
}

// emit writes m.done into m.Owners ordered by owner rank (= Owner order).
func (ix *Index) emit(m *Match) {
	d := m.done
	n := len(d)
	if n == 0 {
		return
	}
	m.Owners = slices.Grow(m.Owners, n)[:n]
	sorted := ix.own.sorted
	if n <= 16 || n*16 < len(sorted) {
		slices.SortFunc(d, func(a, b doneOwner) int { return int(a.rank) - int(b.rank) })
		for j, x := range d {
			m.Owners[j] = ownerMatch(ix.own.list[sorted[x.rank]].o, x.cnt)
		}
		return
	}
	// Many results: scatter by rank, then sweep the ranks in order.
	if len(m.slots) < len(sorted) {
		m.slots = make([]int32, len(sorted))
		for j := range m.slots {
			m.slots[j] = -1
		}
	}
	for j, x := range d {
		m.slots[x.rank] = int32(j)
	}
	w := 0
	for r := range sorted {
		if j := m.slots[r]; j >= 0 {
			m.slots[r] = -1
			m.Owners[w] = ownerMatch(ix.own.list[sorted[r]].o, d[j].cnt)
			w++
		}
	}
}

func ownerMatch(o Owner, c [NumTiers]int32) OwnerMatch {
	return OwnerMatch{Owner: o, Device: c[0], HostExt: c[1], DiskExt: c[2], ExternalExt: c[3]}
}

// ExternalPrefix appends to dst o's external hashes of the first n nodes along the local path
// (entry i belongs to request block i) and returns the extended slice. It stops early where the
// path leaves the index or o holds no tier of the node.
func (ix *Index) ExternalPrefix(o Owner, local []uint64, n int, dst []uint64) []uint64 {
	oi, ok := ix.own.lookup(o)
	if !ok {
		return dst
	}
	cur := uint32(0)
	for i := 0; i < n && i < len(local); i++ {
		child := ix.children.get(cur, local[i])
		if child == 0 {
			break
		}
		nd := &ix.nodes[child]
		pos := ix.findEntry(nd, oi)
		if pos < 0 {
			break
		}
		dst = append(dst, ix.ents.ext[nd.off+uint32(pos)])
		cur = child
	}
	return dst
}
