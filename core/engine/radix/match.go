package radix

import (
	"math/bits"

	"github.com/kvselect/kvselect/kvwire"
)

// OwnerMatch is one owner's overlap with a request, in blocks, under Mooncake "cumulative"
// semantics: Device consecutive blocks from the root held on device; then, from there, HostExt
// further blocks held in host_pinned; then DiskExt in disk; then ExternalExt in external.
// Cumulative views: host = Device+HostExt, disk = host+DiskExt+ExternalExt.
type OwnerMatch struct {
	Owner                                 kvwire.Owner
	Device, HostExt, DiskExt, ExternalExt int32
}

// Match holds the result of Index.Match and the scratch space that makes repeated matches
// allocation-free. The zero value is ready to use; reuse one Match per goroutine. A Match may be
// used with different indexes.
type Match struct {
	// Owners with a non-zero overlap, sorted by Owner. Overwritten by the next Match call.
	Owners []OwnerMatch

	live []liveOwner // explicit live set, sorted by owner index
	// cnt[r] accumulates the counts of the owner of rank r; hit has bit r set iff cnt[r] is
	// non-zero. Both are all-zero between calls (emit clears what it reads).
	cnt [][kvwire.NumTiers]int32
	hit []uint64
	// slot and dst are set only during MatchSlots: counts then go straight to dst[slot[rank]]
	// instead of cnt/hit (see Match.record).
	slot []int32
	dst  []Counts
}

// liveOwner tracks one owner during the walk: it is in tier phase `phase` since block `start`;
// its finished phases' counts are already in Match.cnt[rank].
type liveOwner struct {
	idx   uint32
	rank  uint32
	phase uint32
	start int32
}

// Match walks local block hashes from the root and fills m.Owners with every owner's tiered
// overlap (see OwnerMatch); owners whose four counts are all zero are omitted.
//
// Per owner, at each node along the path: if it holds the node in its current phase's tier it
// continues; otherwise it moves to the next lower tier it holds the node in (earlier phases end);
// if it holds none, or is absent, it stops. At the first node each owner starts in the highest
// tier it holds there.
//
// Cost: O(path) table probes, plus O(owners) at the first node whose owner list differs from the
// first node's and at each later such node (nodes whose (owner, tiers) list equals their
// parent's are crossed in O(1) via a cached flag), plus O(reported owners + all owners/64) to
// emit in Owner order. No allocation once m has grown to the index's owner count.
func (ix *Index) Match(local []uint64, m *Match) {
	if m == nil {
		return
	}
	m.Owners = m.Owners[:0]
	ix.walk(local, m)
	ix.emit(m)
}

// walk runs Match's path walk, leaving every owner's counts in m.cnt by rank with its bit set
// in m.hit (the emitters read and clear both).
func (ix *Index) walk(local []uint64, m *Match) {
	m.live = m.live[:0]
	if nr := len(ix.own.sorted); len(m.cnt) < nr {
		m.cnt = make([][kvwire.NumTiers]int32, nr)
		m.hit = make([]uint64, (nr+63)/64)
	}
	// While implicit, the live set is "every owner of node first, each in the phase of its
	// highest tier there, since block 0": nothing is materialised until a node differs.
	implicit := false
	first := uint32(0)
	cur := uint32(0)
	depth := int32(0)
	for i, h := range local {
		child := ix.child(cur, h)
		if child == 0 {
			break
		}
		switch {
		case i == 0:
			implicit, first = true, child
		case ix.sameAsParent(child):
		case implicit:
			if m.dst != nil {
				ix.matchFirstStepSlots(first, child, int32(i), m)
			} else {
				ix.matchFirstStep(first, child, int32(i), m)
			}
			implicit = false
		default:
			ix.matchStep(child, int32(i), m)
		}
		if !implicit && len(m.live) == 0 {
			break
		}
		cur = child
		depth = int32(i + 1)
	}
	if implicit {
		rankOf := ix.own.rankOf
		if m.dst != nil {
			for _, k := range ix.keysOf(&ix.nodes[first]) {
				m.direct(rankOf[ownerOf(k)], uint32(bits.TrailingZeros32(k)), depth)
			}
			return
		}
		for _, k := range ix.keysOf(&ix.nodes[first]) {
			m.record(rankOf[ownerOf(k)], uint32(bits.TrailingZeros32(k)), depth)
		}
	} else {
		for _, l := range m.live {
			m.record(l.rank, l.phase, depth-l.start)
		}
	}
}

// record stores count c for phase of the owner of rank r (c == 0 leaves the owner unreported):
// in cnt/hit for Match, or directly in the caller's array for MatchSlots. Each (owner, phase)
// is recorded at most once per walk (phases only advance).
func (m *Match) record(r, phase uint32, c int32) {
	if c == 0 {
		return
	}
	if m.dst != nil {
		m.direct(r, phase, c)
		return
	}
	m.cnt[r][phase] = c
	m.hit[r/64] |= 1 << (r % 64)
}

// direct is record for MatchSlots: dst[slot[r]][phase] = c when the slot exists (c ≠ 0 is the
// caller's business: a zero write into a zeroed dst changes nothing).
func (m *Match) direct(r, phase uint32, c int32) {
	if int(r) < len(m.slot) {
		if s := m.slot[r]; s >= 0 && int(s) < len(m.dst) {
			m.dst[s][phase&(uint32(kvwire.NumTiers)-1)] = c
		}
	}
}

// matchFirstStep leaves implicit mode at node id (block i ≥ 1): merges the first node's entries
// (all in their initial phase since block 0) with id's, materialising the survivors. Owners
// absent from id finish with count i in their initial phase; this loop is the O(owners) part of
// a match along a widely shared prefix, so it works on local slices only.
func (ix *Index) matchFirstStep(first, id uint32, i int32, m *Match) {
	fk := ix.keysOf(&ix.nodes[first])
	keys := ix.keysOf(&ix.nodes[id])
	rankOf, cnt, hit := ix.own.rankOf, m.cnt, m.hit
	j := 0
	for _, kx := range fk {
		idx := ownerOf(kx)
		phase := uint32(bits.TrailingZeros32(kx))
		if j < len(keys) {
			for j < len(keys) && ownerOf(keys[j]) < idx {
				j++
			}
			if j < len(keys) && ownerOf(keys[j]) == idx && ix.survive(keys[j], idx, phase, i, m) {
				continue
			}
		}
		r := rankOf[idx]
		cnt[r][phase&(uint32(kvwire.NumTiers)-1)] = i
		hit[r/64] |= 1 << (r % 64)
	}
}

// matchFirstStepSlots is matchFirstStep for MatchSlots: absent owners' counts go straight to the
// caller's array. A copy rather than a branch in the loop, which cost Match ~10%.
func (ix *Index) matchFirstStepSlots(first, id uint32, i int32, m *Match) {
	fk := ix.keysOf(&ix.nodes[first])
	keys := ix.keysOf(&ix.nodes[id])
	rankOf, slot, dst := ix.own.rankOf, m.slot, m.dst
	j := 0
	for _, kx := range fk {
		idx := ownerOf(kx)
		phase := uint32(bits.TrailingZeros32(kx))
		if j < len(keys) {
			for j < len(keys) && ownerOf(keys[j]) < idx {
				j++
			}
			if j < len(keys) && ownerOf(keys[j]) == idx && ix.survive(keys[j], idx, phase, i, m) {
				continue
			}
		}
		if r := rankOf[idx]; int(r) < len(slot) {
			if s := slot[r]; s >= 0 && int(s) < len(dst) {
				dst[s][phase&(uint32(kvwire.NumTiers)-1)] = i
			}
		}
	}
}

// survive handles a first-node owner (index idx, initial phase) that node id (block i) also
// lists with entry key k: it joins the live set, in the same phase when k holds that tier, or
// in its next lower held tier after recording the finished phase. It reports false when k holds
// no tier at or below the phase: the owner stops at i like an absent one.
func (ix *Index) survive(k, idx, phase uint32, i int32, m *Match) bool {
	rankOf := ix.own.rankOf
	if k&(1<<phase) != 0 {
		m.live = append(m.live, liveOwner{idx: idx, rank: rankOf[idx], phase: phase})
		return true
	}
	if higher := (k & tierMask) >> (phase + 1); higher != 0 {
		r := rankOf[idx]
		m.record(r, phase, i)
		m.live = append(m.live, liveOwner{idx: idx, rank: r,
			phase: phase + 1 + uint32(bits.TrailingZeros32(higher)), start: i})
		return true
	}
	return false
}

// matchStep advances the explicit live set across node id (block i): a merge of two lists
// sorted by owner index (binary search when the node has many more entries), compacting the
// survivors in place.
func (ix *Index) matchStep(id uint32, i int32, m *Match) {
	n := &ix.nodes[id]
	keys := ix.keysOf(n)
	live := m.live
	w := 0
	gallop := len(keys) > 8*len(live)
	j := 0
	for r := range live {
		l := live[r]
		var k uint32
		if gallop {
			if pos := ix.findEntry(n, l.idx); pos >= 0 {
				k = keys[pos]
			}
		} else {
			for j < len(keys) && ownerOf(keys[j]) < l.idx {
				j++
			}
			if j < len(keys) && ownerOf(keys[j]) == l.idx {
				k = keys[j]
			}
		}
		if k&(1<<l.phase) != 0 {
			live[w] = l
			w++
			continue
		}
		m.record(l.rank, l.phase, i-l.start)
		if higher := (k & tierMask) >> (l.phase + 1); higher != 0 {
			l.phase += 1 + uint32(bits.TrailingZeros32(higher))
			l.start = i
			live[w] = l
			w++
		}
	}
	m.live = live[:w]
}

// emit writes the recorded owners into m.Owners in rank (= Owner) order and clears the scratch.
func (ix *Index) emit(m *Match) {
	n := 0
	for _, word := range m.hit {
		n += bits.OnesCount64(word)
	}
	if n == 0 {
		return
	}
	out := m.Owners[:0]
	if cap(out) < n {
		out = make([]OwnerMatch, 0, max(n, 2*cap(out)))
	}
	out = out[:n]
	byRank, cnt, hit := ix.own.byRank, m.cnt, m.hit
	w := 0
	for wi, word := range hit {
		if word == 0 {
			continue
		}
		hit[wi] = 0
		for word != 0 {
			r := wi*64 + bits.TrailingZeros64(word)
			word &= word - 1
			c := cnt[r]
			cnt[r] = [kvwire.NumTiers]int32{}
			o := &out[w]
			o.Owner = byRank[r]
			o.Device, o.HostExt, o.DiskExt, o.ExternalExt = c[0], c[1], c[2], c[3]
			w++
		}
	}
	m.Owners = out
}

// ExternalPrefix appends to dst o's external hashes of the first n nodes along the local path
// (entry i belongs to request block i) and returns the extended slice. It stops early where the
// path leaves the index or o holds no tier of the node.
func (ix *Index) ExternalPrefix(o kvwire.Owner, local []uint64, n int, dst []uint64) []uint64 {
	oi, ok := ix.own.lookup(o)
	if !ok {
		return dst
	}
	cur := uint32(0)
	for i := 0; i < n && i < len(local); i++ {
		child := ix.child(cur, local[i])
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
