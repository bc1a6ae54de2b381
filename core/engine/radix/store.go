package radix

import (
	"fmt"
	"slices"

	"github.com/kvselect/kvselect/kvwire"
)

// Store records that owner o now holds blocks in tier t, as one chain: blocks[0] is a child of
// the node o stored under external hash parent (of the root when hasParent is false), blocks[i]
// a child of blocks[i-1]. Nodes are created as needed, keyed by local hash under their parent.
//
// Per block and owner:
//   - a new entry gets tier bit t and the block's external hash, and a lookup (o, External);
//   - an existing entry gains tier bit t (re-storing is idempotent);
//   - if o's existing entry at that node carries a different external hash, the newest hash
//     wins (the old lookup is dropped);
//   - if o's External was bound to a different node, that binding moves here: o's entry at the
//     old node is removed (all tiers), as an engine never holds one hash for two contents.
//
// Errors (nothing changes): ErrInvalidTier; ErrParentNotFound when hasParent and o holds no
// block under parent; ErrDuplicateHash when an external hash repeats within parent+blocks.
// ErrCapacity (blocks before the failing one stay stored) when owner or node indices run out.
//
// Cost: O(len(blocks)·(1 + log owners of the node)) plus entry-list moves; no allocation in
// steady state beyond arena growth.
func (ix *Index) Store(o kvwire.Owner, t kvwire.Tier, parent uint64, hasParent bool, blocks []StoredBlock) error {
	if t >= kvwire.NumTiers {
		return fmt.Errorf("%w: %d", ErrInvalidTier, t)
	}
	if err := ix.checkDistinct(parent, hasParent, blocks); err != nil {
		return err
	}
	oi, known := ix.own.lookup(o)
	cur := uint32(0)
	if hasParent {
		if known {
			cur = ix.lookup.get(oi, parent)
		}
		if cur == 0 {
			return fmt.Errorf("%w: worker %d rank %d parent %#x", ErrParentNotFound, o.Worker, o.Rank, parent)
		}
	}
	if len(blocks) == 0 {
		return nil
	}
	if !known {
		var ok bool
		if oi, ok = ix.own.intern(o); !ok {
			return fmt.Errorf("%w: more than %d owners", ErrCapacity, maxOwners)
		}
		// The owner holds nothing yet. Pin it with a phantom count so that a rebind removal
		// below cannot release the index mid-store; dropped at the end.
	}
	ix.own.list[oi].entries++
	defer ix.finishStore(oi)
	bit := uint32(1) << t
	var sink uint32
	for _, b := range blocks {
		sink += ix.lookup.touchSlot(oi, b.External)
	}
	ix.sink += sink
	for _, b := range blocks {
		// Resolve a binding of b.External to another node first: its removal may prune empty
		// nodes, and cur (root, or a node holding o's previous block) always survives it.
		if old := ix.lookup.get(oi, b.External); old != 0 {
			if ix.nodes[old].parent == cur && ix.nodes[old].local == b.Local {
				// Already bound here: just add the tier.
				n := &ix.nodes[old]
				pos := ix.findEntry(n, oi)
				k := &ix.ents.keys[n.off+uint32(pos)]
				if *k&bit == 0 {
					*k |= bit
					ix.touch(old)
				}
				cur = old
				continue
			}
			ix.deleteEntry(old, ix.findEntry(&ix.nodes[old], oi))
		}
		// A node without children (in particular one created by the previous block) needs no
		// probe: the new child goes straight in.
		var child uint32
		if ix.nodes[cur].nchild != 0 {
			child = ix.child(cur, b.Local)
		}
		if child == 0 {
			var ok bool
			if child, ok = ix.newNode(cur, b.Local); !ok {
				return fmt.Errorf("%w: node indices exhausted", ErrCapacity)
			}
		}
		n := &ix.nodes[child]
		pos := ix.findEntry(n, oi)
		if pos >= 0 {
			// o holds this node under another external hash: the newest wins.
			off := n.off + uint32(pos)
			ix.lookup.del(oi, ix.ents.ext[off])
			ix.ents.ext[off] = b.External
			if ix.ents.keys[off]&bit == 0 {
				ix.ents.keys[off] |= bit
				ix.touch(child)
			}
		} else {
			ix.insertEntry(child, -pos-1, oi<<keyShift|bit, b.External)
		}
		ix.lookup.put(oi, b.External, child)
		cur = child
	}
	return nil
}

// finishStore flushes the deferred children-table inserts, then drops Store's phantom count on
// owner oi and frees the owner if it ended up holding nothing.
func (ix *Index) finishStore(oi uint32) {
	ix.flushChildren()
	info := &ix.own.list[oi]
	info.entries--
	if info.entries == 0 {
		ix.own.release(oi)
		if ix.entries == 0 && len(ix.nodes)-1 == ix.nfree {
			ix.resetStorage()
		}
	}
}

// checkDistinct rejects a store event whose external hashes (parent included) repeat.
func (ix *Index) checkDistinct(parent uint64, hasParent bool, blocks []StoredBlock) error {
	n := len(blocks)
	if n <= 24 {
		for i := range blocks {
			e := blocks[i].External
			if hasParent && e == parent {
				return fmt.Errorf("%w: %#x", ErrDuplicateHash, e)
			}
			for j := i + 1; j < n; j++ {
				if blocks[j].External == e {
					return fmt.Errorf("%w: %#x", ErrDuplicateHash, e)
				}
			}
		}
		return nil
	}
	s := ix.scratch[:0]
	if hasParent {
		s = append(s, parent)
	}
	for _, b := range blocks {
		s = append(s, b.External)
	}
	slices.Sort(s)
	ix.scratch = s
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return fmt.Errorf("%w: %#x", ErrDuplicateHash, s[i])
		}
	}
	return nil
}

// Remove clears tier t of each listed external hash of owner o. A hash o does not hold in tier t
// (or at all) counts as unknown and is otherwise ignored; removed+unknown == len(external).
// When o no longer holds a node in any tier, its entry and lookup go, and nodes left without
// owners and children are freed (their memory is reused by later stores).
func (ix *Index) Remove(o kvwire.Owner, t kvwire.Tier, external []uint64) (removed, unknown int) {
	oi, ok := ix.own.lookup(o)
	if !ok || t >= kvwire.NumTiers {
		return 0, len(external)
	}
	bit := uint32(1) << t
	var sink uint32
	for _, e := range external {
		sink += ix.lookup.touchSlot(oi, e)
	}
	ix.sink += sink
	for i, e := range external {
		id := ix.lookup.get(oi, e)
		if id == 0 {
			unknown++
			continue
		}
		n := &ix.nodes[id]
		pos := ix.findEntry(n, oi)
		k := &ix.ents.keys[n.off+uint32(pos)]
		if *k&bit == 0 {
			unknown++
			continue
		}
		removed++
		if *k&tierMask != bit {
			*k &^= bit
			ix.touch(id)
			continue
		}
		last := ix.own.list[oi].entries == 1
		ix.deleteEntry(id, pos)
		if last {
			// The owner index was released: every remaining hash is unknown.
			return removed, unknown + len(external) - i - 1
		}
	}
	return removed, unknown
}

// ClearOwner drops every entry of o in every tier (vLLM AllBlocksCleared) and returns how many
// entries were dropped. Cost: one scan of the lookup table plus the removals.
func (ix *Index) ClearOwner(o kvwire.Owner) int {
	oi, ok := ix.own.lookup(o)
	if !ok {
		return 0
	}
	return ix.clearIndices(func(i uint32) bool { return i == oi })
}

// RemoveWorker drops every entry of every rank of worker and returns how many were dropped.
func (ix *Index) RemoveWorker(worker uint64) int {
	return ix.clearIndices(func(i uint32) bool {
		// Indices in the lookup table are live, so list[i] is valid.
		return ix.own.list[i].o.Worker == worker
	})
}

// clearIndices removes every entry whose owner index satisfies sel.
func (ix *Index) clearIndices(sel func(uint32) bool) int {
	type hit struct {
		idx uint32
		ext uint64
	}
	var hits []hit
	for _, s := range ix.lookup.slots {
		if s.val != 0 && sel(s.a) {
			hits = append(hits, hit{s.a, s.ext()})
		}
	}
	for _, h := range hits {
		id := ix.lookup.get(h.idx, h.ext)
		ix.deleteEntry(id, ix.findEntry(&ix.nodes[id], h.idx))
	}
	return len(hits)
}

func (s slot) ext() uint64 { return s.b }
