package load

import (
	"fmt"
	"slices"
)

// checkInvariants recomputes every derived quantity of t from first
// principles (the live bookings) and compares it with what t maintains
// incrementally. It returns the first violation found.
func (t *Tracker) checkInvariants() error {
	// Owners: order sorted, ord/slots consistent.
	if len(t.order) != len(t.slots) {
		return fmt.Errorf("order has %d owners, slots %d", len(t.order), len(t.slots))
	}
	for i, s := range t.order {
		st := &t.owners[s]
		if !st.live || t.ord[s] != uint32(i) || t.slots[st.id] != s || t.ids[i] != st.id {
			return fmt.Errorf("owner slot %d (ord %d) inconsistent", s, i)
		}
		if i > 0 && t.owners[t.order[i-1]].id.Compare(st.id) >= 0 {
			return fmt.Errorf("order not sorted at %d", i)
		}
	}

	// The ordinal-indexed speeds mirror the estimators.
	if len(t.speeds) != len(t.order) {
		return fmt.Errorf("%d speeds for %d owners", len(t.speeds), len(t.order))
	}
	for i, s := range t.order {
		if t.speeds[i] != t.owners[s].speed.est.cur {
			return fmt.Errorf("speeds[%d] stale", i)
		}
	}

	// The partition-wide pending count is the sum of the owners'.
	pend := 0
	for _, s := range t.order {
		pend += t.owners[s].pending
	}
	if pend != t.PendingPrefills() {
		return fmt.Errorf("PendingPrefills %d, owners' sum %d", t.PendingPrefills(), pend)
	}
	if err := t.checkAggregates(); err != nil {
		return err
	}

	// Bookings: walk every live booking's path, counting references.
	type key struct{ node, slot uint32 }
	refs := map[key]uint32{}
	prefill := map[uint32]uint64{}
	contexts := map[uint32]uint64{}
	weight := map[uint32]uint64{}
	count := map[uint32]int{}
	live := 0
	for bi := range t.books {
		r := &t.books[bi]
		if !r.live {
			continue
		}
		live++
		if t.byID[r.id] != uint32(bi) {
			return fmt.Errorf("booking %q not indexed at %d", r.id, bi)
		}
		st := &t.owners[r.slot]
		if !st.live || int(r.ownerPos) >= len(st.bookings) || st.bookings[r.ownerPos] != uint32(bi) {
			return fmt.Errorf("booking %q owner list position wrong", r.id)
		}
		prefill[r.slot] += r.prefill
		contexts[r.slot] += r.prompt
		weight[r.slot] += r.outOne*WeightUnit + r.outDecayed*uint64(r.outW)
		count[r.slot]++
		var path []uint64
		for n := r.tail; n != nilNode; n = t.nodes[n].parent {
			refs[key{n, r.slot}]++
			path = append(slices.Clone(t.nodes[n].edge), path...)
		}
		if !slices.Equal(path, r.hashes) && (len(path) != 0 || len(r.hashes) != 0) {
			return fmt.Errorf("booking %q path %v != hashes %v", r.id, path, r.hashes)
		}
	}
	if live != len(t.byID) {
		return fmt.Errorf("%d live records, %d ids", live, len(t.byID))
	}

	// Nodes: entries match the references, children counts, chains.
	children := map[uint32]uint32{}
	childXor := map[uint32]uint32{}
	free := map[uint32]bool{}
	for _, n := range t.freeNodes {
		free[n] = true
	}
	for n := 1; n < len(t.nodes); n++ {
		nd := &t.nodes[n]
		if free[uint32(n)] {
			if nd.edge != nil || len(nd.ents) != 0 {
				return fmt.Errorf("free node %d not empty", n)
			}
			continue
		}
		if len(nd.edge) == 0 || len(nd.ents) == 0 {
			return fmt.Errorf("live node %d has %d hashes, %d entries", n, len(nd.edge), len(nd.ents))
		}
		if got := t.child(nd.parent, nd.edge[0]); got != uint32(n) {
			return fmt.Errorf("node %d not found under its parent (got %d)", n, got)
		}
		if nd.parent != nilNode {
			children[nd.parent]++
			childXor[nd.parent] ^= uint32(n)
		}
		for i, e := range nd.ents {
			if i > 0 && t.ord[nd.ents[i-1].slot] >= t.ord[e.slot] {
				return fmt.Errorf("node %d entries not sorted", n)
			}
			if e.rc == 0 || refs[key{uint32(n), e.slot}] != e.rc || e.w > WeightUnit {
				return fmt.Errorf("node %d slot %d rc %d w %d, want rc %d", n, e.slot, e.rc, e.w, refs[key{uint32(n), e.slot}])
			}
			delete(refs, key{uint32(n), e.slot})
			weight[e.slot] += uint64(len(nd.edge)) * uint64(e.w)
			if nd.parent != nilNode {
				pe := t.nodes[nd.parent].ents
				j, ok := t.findEntry(pe, e.slot)
				if !ok || pe[j].rc < e.rc {
					return fmt.Errorf("node %d slot %d: rc not monotone toward root", n, e.slot)
				}
			}
		}
	}
	if len(refs) != 0 {
		return fmt.Errorf("%d references without entries", len(refs))
	}
	for n := 1; n < len(t.nodes); n++ {
		if !free[uint32(n)] && (t.nodes[n].children != children[uint32(n)] || t.nodes[n].childXor != childXor[uint32(n)]) {
			return fmt.Errorf("node %d children %d (xor %d), want %d (xor %d)",
				n, t.nodes[n].children, t.nodes[n].childXor, children[uint32(n)], childXor[uint32(n)])
		}
	}
	for h, n := range t.heads {
		for ; n != nilNode; n = t.nodes[n].sameNext {
			if free[n] || t.nodes[n].edge[0] != h {
				return fmt.Errorf("heads chain of %x holds node %d", h, n)
			}
		}
	}

	for _, s := range t.order {
		st := &t.owners[s]
		if st.contexts != contexts[s] {
			return fmt.Errorf("owner %v: contexts %d, bookings sum to %d", st.id, st.contexts, contexts[s])
		}
		if st.prefill != prefill[s] || st.weight != weight[s] || len(st.bookings) != count[s] {
			return fmt.Errorf("owner %+v: prefill %d weight %d requests %d, want %d %d %d",
				st.id, st.prefill, st.weight, len(st.bookings), prefill[s], weight[s], count[s])
		}
	}
	return nil
}
