package radix

// DumpEvent is one replayable store event produced by Dump. Blocks is only valid during the visit
// call that receives it.
type DumpEvent struct {
	Owner     Owner
	Tier      Tier
	Parent    uint64 // the owner's external hash of the parent node; meaningful iff HasParent
	HasParent bool   // false for children of the root
	Blocks    []StoredBlock
}

// Dump visits the index as store events, breadth-first from the root's children outward, so a
// parent's events always precede its children's. For each node, each owner and each tier bit it
// holds there, the node's block appears in one event whose Parent is the owner's external hash
// of the parent node. Where an owner is the only owner along a run of single-child nodes with
// the same tier bits (a conversation tail), the run is merged into one multi-block event.
// Entries the owner cannot reach from the root through its own chain (it holds no tier of some
// ancestor) are skipped: they are invisible to Match and a replay could not attach them.
//
// Replaying the events in order with Store into an empty Index yields an index with equal Match
// and ExternalPrefix results and an equal Dump multiset (after splitting merged runs).
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
	for _, id := range order {
		n := &ix.nodes[id]
		p := &ix.nodes[n.parent]
		keys := ix.keysOf(n)
		for j, k := range keys {
			if k&doneBit != 0 {
				continue // emitted as part of an ancestor's merged run
			}
			oi := ownerOf(k)
			ev := DumpEvent{Owner: ix.own.list[oi].o}
			if n.parent != 0 {
				pos := ix.findEntry(p, oi)
				if pos < 0 {
					continue
				}
				pk := ix.ents.keys[p.off+uint32(pos)]
				if pk&markBit == 0 {
					continue
				}
				ev.Parent, ev.HasParent = ix.ents.ext[p.off+uint32(pos)], true
			}
			keys[j] |= markBit
			blk = append(blk[:0], StoredBlock{External: ix.ents.ext[n.off+uint32(j)], Local: n.local})
			blk = ix.extendRun(id, k, start, kids, blk)
			ev.Blocks = blk
			for t := Tier(0); t < NumTiers; t++ {
				if k&(1<<t) == 0 {
					continue
				}
				ev.Tier = t
				if !visit(ev) {
					return
				}
			}
		}
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
