package radix

import (
	"slices"

	"github.com/kvselect/kvselect/kvwire"
)

// DumpEvent is one replayable store event produced by Dump. Blocks is only valid during the visit
// call that receives it.
//
// Bridge > 0 marks an entry the owner holds below a block it no longer holds (a block removed
// from the middle of its chain): Blocks[:Bridge] are the nodes between the owner's nearest held
// ancestor (Parent, or the root) and the entry, under placeholder external hashes the owner holds
// nowhere, and the replayer must remove them (Remove(Owner, Tier, their hashes)) right after the
// Store. The owner then holds exactly what it held in the dumped index.
type DumpEvent struct {
	Owner     kvwire.Owner
	Tier      kvwire.Tier
	Parent    uint64 // the owner's external hash of its nearest held ancestor; meaningful iff HasParent
	HasParent bool   // false when the owner holds no ancestor of Blocks[0]
	Blocks    []StoredBlock
	Bridge    int // leading placeholder blocks to remove after the store (0 for a reachable chain)
}

// Dump visits the index as store events, breadth-first from the root's children outward, so an
// owner's events for a node always follow its events for the node's ancestors. For each node,
// each owner and each tier bit it holds there, the node's block appears in one event whose
// Parent is the owner's external hash of the parent node. Where an owner is the only owner along
// a run of single-child nodes with the same tier bits (a conversation tail), the run is merged
// into one multi-block event.
//
// Every entry is dumped, including those the owner cannot reach from the root through its own
// chain (it removed an ancestor's block but still holds the descendants, as the live index
// does): Match does not see them, but they come back into view when the owner stores the
// missing block again, so a replica recovered from the dump must hold them too. Such an entry's
// event bridges the gap with placeholder blocks (DumpEvent.Bridge).
//
// Replaying the events in order (Store, then Remove of each event's bridge) into an empty Index
// yields an index with the same entries: equal Match and ExternalPrefix results now and after
// any further operations, and an equal Dump multiset (after splitting merged runs).
//
// visit returns false to stop early. visit must not call any method of ix (the index carries
// scratch marks during the walk). Dump allocates O(nodes) temporary memory for the traversal.
func (ix *Index) Dump(visit func(DumpEvent) bool) {
	if visit == nil {
		return
	}
	order, start, kids := ix.bfsOrder()
	defer func() {
		for _, id := range order {
			keys := ix.keysOf(&ix.nodes[id])
			for j := range keys {
				keys[j] &^= scratchMs
			}
		}
	}()
	var blk []StoredBlock
	var gaps []uint32
	ph := placeholders{next: placeholderSeed}
	for _, id := range order {
		n := &ix.nodes[id]
		keys := ix.keysOf(n)
		for j, k := range keys {
			if k&doneBit != 0 {
				continue // emitted as part of an ancestor's merged run
			}
			oi := ownerOf(k)
			ev := DumpEvent{Owner: ix.own.list[oi].o}
			blk = blk[:0]
			if n.parent != 0 {
				var at uint32
				at, ev.HasParent, gaps = ix.heldAncestor(n.parent, oi, gaps[:0])
				if ev.HasParent {
					ev.Parent = ix.ents.ext[at]
				}
				for g := len(gaps) - 1; g >= 0; g-- {
					blk = append(blk, StoredBlock{External: ph.take(ix, oi), Local: ix.nodes[gaps[g]].local})
				}
				ev.Bridge = len(gaps)
			}
			keys[j] |= markBit
			blk = append(blk, StoredBlock{External: ix.ents.ext[n.off+uint32(j)], Local: n.local})
			blk = ix.extendRun(id, k, start, kids, blk)
			ev.Blocks = blk
			for t := kvwire.Tier(0); t < kvwire.NumTiers; t++ {
				if k&(1<<t) == 0 {
					continue
				}
				ev.Tier = t
				if !visit(ev) {
					return
				}
			}
			ph.used = ph.used[:0]
		}
	}
}

// heldAncestor walks up from node id (inclusive) to the nearest node where owner index oi has
// an entry, appending the nodes passed without one (bottom-up) to gaps. It returns that entry's
// slot in ix.ents, or ok false when the owner holds no ancestor (the chain hangs from the root).
func (ix *Index) heldAncestor(id, oi uint32, gaps []uint32) (slot uint32, ok bool, _ []uint32) {
	for id != 0 {
		n := &ix.nodes[id]
		if pos := ix.findEntry(n, oi); pos >= 0 {
			return n.off + uint32(pos), true, gaps
		}
		gaps = append(gaps, id)
		id = n.parent
	}
	return 0, false, gaps
}

// placeholderSeed starts Dump's placeholder hash sequence (any constant: the hashes only need to
// be unused by their owner and distinct within one event).
const placeholderSeed = 0x9e3779b97f4a7c15

// placeholders issues the bridge hashes of one Dump: deterministic, never one the owner holds
// (a Store of a held hash would move that entry), never repeated within an event.
type placeholders struct {
	next uint64
	used []uint64 // issued for the current event
}

func (p *placeholders) take(ix *Index, oi uint32) uint64 {
	for {
		h := p.next
		p.next = p.next*0x5851f42d4c957f2d + 0x14057b7ef767814f
		if h == 0 || ix.lookup.get(oi, h) != 0 || slices.Contains(p.used, h) {
			continue
		}
		p.used = append(p.used, h)
		return h
	}
}

// extendRun appends to blk the single-child descendants of node id whose only entry is the same
// owner with the same tier bits as key k, marking those entries reachable and done.
func (ix *Index) extendRun(id uint32, k uint32, start, kids []uint32, blk []StoredBlock) []StoredBlock {
	want := k &^ scratchMs
	for {
		if start[id+1]-start[id] != 1 {
			return blk
		}
		c := kids[start[id]]
		n := &ix.nodes[c]
		if n.count() != 1 || ix.ents.keys[n.off]&^scratchMs != want {
			return blk
		}
		ix.ents.keys[n.off] |= markBit | doneBit
		blk = append(blk, StoredBlock{External: ix.ents.ext[n.off], Local: n.local})
		id = c
	}
}

// bfsOrder lists live non-root nodes breadth-first. It builds a temporary child adjacency (CSR:
// the children of node i are kids[start[i]:start[i+1]]) from the children table, since nodes do
// not store child lists, and returns it too.
func (ix *Index) bfsOrder() (order, start, kids []uint32) {
	nn := len(ix.nodes)
	start = make([]uint32, nn+1)
	for _, s := range ix.children.slots {
		if s.val != 0 {
			start[s.a+1]++
		}
	}
	for i := 1; i <= nn; i++ {
		start[i] += start[i-1]
	}
	kids = make([]uint32, start[nn])
	fill := make([]uint32, nn)
	copy(fill, start[:nn])
	for _, s := range ix.children.slots {
		if s.val != 0 {
			kids[fill[s.a]] = s.val
			fill[s.a]++
		}
	}
	order = make([]uint32, 0, len(kids))
	order = append(order, kids[start[0]:start[1]]...)
	for q := 0; q < len(order); q++ {
		id := order[q]
		order = append(order, kids[start[id]:start[id+1]]...)
	}
	return order, start, kids
}

// Holds reports whether owner o holds a block under external hash h (in any tier). A replayer
// merging a bridged DumpEvent into a non-empty index checks its placeholders with it first.
func (ix *Index) Holds(o kvwire.Owner, h uint64) bool {
	oi, ok := ix.own.lookup(o)
	return ok && ix.lookup.get(oi, h) != 0
}

// KeepHeld filters hs in place to the hashes owner o holds (in any tier), in order, and returns
// the kept prefix of hs: Holds for each, with the owner looked up once.
func (ix *Index) KeepHeld(o kvwire.Owner, hs []uint64) []uint64 {
	oi, ok := ix.own.lookup(o)
	if !ok {
		return hs[:0]
	}
	kept := hs[:0]
	for _, h := range hs {
		if ix.lookup.get(oi, h) != 0 {
			kept = append(kept, h)
		}
	}
	return kept
}
