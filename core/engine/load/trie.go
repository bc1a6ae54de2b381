package load

import (
	"cmp"
	"slices"
)

// nilNode is the index of no node: the parent of root nodes, the end of a
// same-hash chain, and the tail of a booking with an empty prompt. Slot 0 of
// Tracker.nodes is reserved for it and never used.
const nilNode uint32 = 0

// node is one edge of the partition-wide prompt trie.
//
// Invariants (checked by the tests' invariant walker):
//   - edge is non-empty and never modified in place (it may alias a
//     booking's Hashes and other nodes' edges); splitting re-slices it.
//   - Every booking whose prompt path reaches this node covers all of edge,
//     so ents holds, for each owner with such bookings, rc = their count and
//     one weight valid for every block of the edge. ents is sorted by owner
//     (Worker, Rank), i.e. by ord[slot]; renumbering ord when an owner is
//     added or removed keeps the relative order, so the lists stay sorted.
//     ents has no rc == 0 entry and is empty only on a free node.
//   - rc is monotone along a path: a child's entries are a subset of its
//     parent's with rc no larger.
//   - The children of one node differ in edge[0]; (parent, edge[0])
//     identifies a node. heads maps edge[0] to the first node of a chain
//     (linked by sameNext) of nodes starting with that hash; with chained
//     tracking hashes the chain has length one.
type node struct {
	edge     []uint64
	ents     []entry
	parent   uint32
	sameNext uint32
	children uint32
	// childXor is the XOR of the children's indices: with one child, it is
	// that child (used to re-merge a node with its only child).
	childXor uint32
}

// entry is one owner's share of a node.
type entry struct {
	slot uint32 // owner slot
	rc   uint32 // live bookings of the owner whose path covers the node
	w    uint32 // weight of each block of the edge, in WeightUnit
}

// child returns the node under parent whose edge starts with h, or nilNode.
func (t *Tracker) child(parent uint32, h uint64) uint32 {
	n := t.heads[h]
	for n != nilNode && t.nodes[n].parent != parent {
		n = t.nodes[n].sameNext
	}
	return n
}

// link enters n into the same-hash chain of its first hash.
func (t *Tracker) link(n uint32) {
	h := t.nodes[n].edge[0]
	t.nodes[n].sameNext = t.heads[h]
	t.heads[h] = n
}

// unlink removes n from the same-hash chain of its first hash.
func (t *Tracker) unlink(n uint32) {
	h := t.nodes[n].edge[0]
	next := t.nodes[n].sameNext
	t.nodes[n].sameNext = nilNode
	head := t.heads[h]
	if head == n {
		if next == nilNode {
			delete(t.heads, h)
		} else {
			t.heads[h] = next
		}
		return
	}
	for p := head; p != nilNode; p = t.nodes[p].sameNext {
		if t.nodes[p].sameNext == n {
			t.nodes[p].sameNext = next
			return
		}
	}
}

// newNode allocates a node with the given edge under parent, with no
// entries, and links it. The node's entry slice keeps the capacity of a
// recycled node, so steady-state churn does not allocate.
func (t *Tracker) newNode(parent uint32, edge []uint64) uint32 {
	var n uint32
	if k := len(t.freeNodes); k > 0 {
		n = t.freeNodes[k-1]
		t.freeNodes = t.freeNodes[:k-1]
	} else {
		n = uint32(len(t.nodes))
		t.nodes = append(t.nodes, node{})
	}
	nd := &t.nodes[n]
	nd.edge, nd.parent, nd.children, nd.childXor = edge, parent, 0, 0
	nd.ents = nd.ents[:0]
	t.link(n)
	if parent != nilNode {
		t.nodes[parent].children++
		t.nodes[parent].childXor ^= n
	}
	return n
}

// dropNode unlinks an empty, childless node and recycles it.
func (t *Tracker) dropNode(n uint32) {
	t.unlink(n)
	nd := &t.nodes[n]
	if nd.parent != nilNode {
		t.nodes[nd.parent].children--
		t.nodes[nd.parent].childXor ^= n
	}
	t.recycle(n)
}

// recycle returns an unlinked node to the free list.
func (t *Tracker) recycle(n uint32) {
	nd := &t.nodes[n]
	nd.edge, nd.parent, nd.children, nd.childXor = nil, nilNode, 0, 0
	nd.ents = nd.ents[:0]
	t.freeNodes = append(t.freeNodes, n)
}

// split cuts n after its first m hashes (0 < m < len(edge)) and returns the
// new prefix node p. n keeps the suffix, its children and its identity, so
// booking tails that point at n stay valid; p takes n's place under n's
// parent and copies n's entries (same owners, counts and weights, which is
// why owner weight sums are unchanged).
func (t *Tracker) split(n uint32, m int) uint32 {
	t.unlink(n)
	edge := t.nodes[n].edge
	parent := t.nodes[n].parent
	p := t.newNode(parent, edge[:m:m])
	// newNode counted p as an extra child of parent; n leaves it below.
	if parent != nilNode {
		t.nodes[parent].children--
		t.nodes[parent].childXor ^= n
	}
	t.nodes[p].ents = append(t.nodes[p].ents, t.nodes[n].ents...)
	t.nodes[p].children, t.nodes[p].childXor = 1, n
	nd := &t.nodes[n]
	nd.edge, nd.parent = edge[m:], p
	t.link(n)
	return p
}

// commonPrefix returns the length of the longest common prefix of a and b.
func commonPrefix(a, b []uint64) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// findEntry returns the index of slot's entry in ents (sorted by owner
// ordinal), or the insertion index and false.
func (t *Tracker) findEntry(ents []entry, slot uint32) (int, bool) {
	ord := t.ord
	target := ord[slot]
	if len(ents) <= 8 { // short lists: a linear scan beats the search
		for i := range ents {
			if o := ord[ents[i].slot]; o >= target {
				return i, o == target
			}
		}
		return len(ents), false
	}
	return slices.BinarySearchFunc(ents, target, func(e entry, target uint32) int {
		return cmp.Compare(ord[e.slot], target)
	})
}

// acquire enters one booking of owner slot with prompt h into the trie and
// returns its tail node (nilNode for an empty prompt). New blocks weigh 1;
// blocks already live on the owner only gain a reference.
func (t *Tracker) acquire(slot uint32, h []uint64) uint32 {
	if len(h) == 0 {
		return nilNode
	}
	var tail uint32
	parent, pos := nilNode, 0
	for {
		n := t.child(parent, h[pos])
		if n == nilNode {
			tail = t.newNode(parent, h[pos:len(h):len(h)])
			break
		}
		edge := t.nodes[n].edge
		m := commonPrefix(edge, h[pos:])
		if m < len(edge) {
			p := t.split(n, m)
			if pos+m == len(h) {
				tail = p
			} else {
				tail = t.newNode(p, h[pos+m:len(h):len(h)])
			}
			break
		}
		pos += m
		if pos == len(h) {
			tail = n
			break
		}
		parent = n
	}
	st := &t.owners[slot]
	for n := tail; n != nilNode; n = t.nodes[n].parent {
		nd := &t.nodes[n]
		i, ok := t.findEntry(nd.ents, slot)
		if ok {
			nd.ents[i].rc++
			continue
		}
		nd.ents = slices.Insert(nd.ents, i, entry{slot: slot, rc: 1, w: WeightUnit})
		st.weight += uint64(len(nd.edge)) * WeightUnit
	}
	return tail
}

// release removes one booking of owner slot whose prompt path ends at tail:
// every node on the path loses one reference of the owner; entries that reach
// zero take their weight off the owner, nodes left without entries are
// recycled, and a node left with one child that carries the same entries is
// merged into it (see mergeChild), so splits made for bookings that are gone
// do not lengthen later walks.
func (t *Tracker) release(slot uint32, tail uint32) {
	st := &t.owners[slot]
	for n := tail; n != nilNode; {
		nd := &t.nodes[n]
		parent := nd.parent
		if i, ok := t.findEntry(nd.ents, slot); ok {
			if nd.ents[i].rc > 1 {
				nd.ents[i].rc--
			} else {
				st.weight -= uint64(len(nd.edge)) * uint64(nd.ents[i].w)
				nd.ents = slices.Delete(nd.ents, i, i+1)
			}
		}
		// No entries means no booking passes here, hence no children.
		if len(nd.ents) == 0 && nd.children == 0 {
			t.dropNode(n)
		} else if nd.children == 1 {
			t.mergeChild(n)
		}
		n = parent
	}
}

// mergeChild merges node n into its only child c when both carry the same
// entries (owners, counts and weights): then no booking ends at n and the
// split between them no longer means anything. c keeps its identity (booking
// tails may point at it) and takes n's place and edge prefix; n is
// recycled. The joined edge is a fresh slice (one allocation).
func (t *Tracker) mergeChild(n uint32) {
	c := t.nodes[n].childXor
	if !slices.Equal(t.nodes[n].ents, t.nodes[c].ents) {
		return
	}
	t.unlink(n)
	t.unlink(c)
	ne, ce := t.nodes[n].edge, t.nodes[c].edge
	edge := make([]uint64, len(ne)+len(ce))
	copy(edge[copy(edge, ne):], ce)
	parent := t.nodes[n].parent
	cn := &t.nodes[c]
	cn.edge, cn.parent = edge, parent
	t.link(c)
	if parent != nilNode {
		t.nodes[parent].childXor ^= n ^ c // c replaces n; the count is unchanged
	}
	t.recycle(n)
}

// decay sets weight w on the blocks of the path ending at tail that only
// this booking holds on owner slot (rc == 1). rc grows toward the root, so
// those blocks form a suffix of the path and the walk stops at the first
// shared node.
func (t *Tracker) decay(slot uint32, tail uint32, w uint32) {
	st := &t.owners[slot]
	for n := tail; n != nilNode; n = t.nodes[n].parent {
		nd := &t.nodes[n]
		i, ok := t.findEntry(nd.ents, slot)
		if !ok || nd.ents[i].rc != 1 {
			return
		}
		l := uint64(len(nd.edge))
		st.weight = st.weight - l*uint64(nd.ents[i].w) + l*uint64(w)
		nd.ents[i].w = w
	}
}
