package radix

import (
	"errors"
	"slices"

	"github.com/kvselect/kvselect/kvwire"
)

// Sentinel errors returned (wrapped) by Store.
var (
	// ErrParentNotFound: the owner holds no block under the event's parent external hash.
	ErrParentNotFound = errors.New("radix: parent block not found")
	// ErrDuplicateHash: an external hash repeats within one store event (parent included).
	ErrDuplicateHash = errors.New("radix: external hash repeated within one store event")
	// ErrInvalidTier: the tier is not one of the NumTiers storage tiers.
	ErrInvalidTier = errors.New("radix: invalid storage tier")
	// ErrCapacity: the index cannot grow further (owner or node indices exhausted).
	ErrCapacity = errors.New("radix: index capacity exhausted")
)

// StoredBlock is one block of a store event: the engine's opaque External hash and our Local hash
// of the block's own tokens (the radix edge label).
type StoredBlock struct {
	External uint64
	Local    uint64
}

// Index is the radix prefix index of one (model_name, routing_group) partition.
//
// Concurrency: an Index is not safe for concurrent use, not even by concurrent readers (Match
// refreshes internal caches). The caller serialises every call.
//
// Layout: nodes live in one pointer-free slice addressed by uint32; node 0 is the root, which has
// no block and no owners. Children are found through one table keyed by (parent, local hash);
// per-owner lookups through one table keyed by (owner index, external hash). Each node's owners
// are a sorted chunk in the entry slab. Freed nodes go on a free list threaded through parent.
//
// Invariants (checked by the tests against a naive reference):
//   - children[(p, h)] = c  ⇔  nodes[c] is live, nodes[c].parent = p, nodes[c].local = h.
//   - For each entry (node n, owner i, ext e): lookup[(i, e)] = n, and vice versa; an owner has
//     at most one entry per node and its external hashes are distinct across its entries.
//   - Every entry has at least one tier bit.
//   - A non-root node with no entries has at least one child (empty leaves are freed at once).
//   - nodes[n].nchild counts n's live children.
type Index struct {
	nodes    []node
	freeNode uint32 // head of the free node list (index, 0 = empty)
	nfree    int    // nodes on the free list
	children table
	lookup   table
	ents     slab
	own      owners
	entries  int    // total (node, owner) entries
	epoch    uint32 // bumped on every entry change; see node.chg
	scratch  []uint64
	prune    []uint32 // scratch of pruneFrom
	pending  []uint32 // nodes created by the running Store, not yet in children (see flushChildren)
	sink     uint32   // keeps the cache-warming loads of touchSlot from being optimised away
}

// node is one radix node (32 bytes, no pointers).
type node struct {
	local  uint64 // the block's local hash (edge label from parent)
	parent uint32 // parent node; next free node while on the free list
	off    uint32 // slab offset of the entry chunk
	meta   uint32 // entry count (bits 0..25) | slab class (bits 26..30) | same flag (bit 31)
	nchild uint32 // live children
	// chg is the epoch of the last change to this node's entries. chk is the epoch at which the
	// same flag was computed (0 = never). The flag is valid iff chk > chg of both this node and
	// its parent: then this node's (owner, tiers) list equals its parent's, and Match can carry
	// every surviving owner across it without looking at the entries.
	chg uint32
	chk uint32
}

const (
	countMask  = 1<<26 - 1
	classShift = 26
	classMask  = 0x1f << classShift
	sameFlag   = 1 << 31
	// freeMeta marks a node on the free list (class 31 is never a real slab class).
	freeMeta = classMask
)

func (n *node) count() int     { return int(n.meta & countMask) }
func (n *node) class() uint8   { return uint8((n.meta & classMask) >> classShift) }
func (n *node) setCount(c int) { n.meta = n.meta&^countMask | uint32(c) }
func (n *node) setClass(c uint8) {
	n.meta = n.meta&^classMask | uint32(c)<<classShift
}

// New returns an empty index with a fixed hash seed.
func New() *Index { return NewSeeded(0x6b7673656c656374) }

// NewSeeded returns an empty index whose hash tables mix in seed. Deployments that index blocks
// influenced by untrusted input may pass a secret seed so collisions cannot be precomputed.
func NewSeeded(seed uint64) *Index {
	ix := &Index{}
	ix.children.seed = seed
	ix.lookup.seed = seed ^ 0x5851f42d4c957f2d
	ix.nodes = make([]node, 1, 64) // the root
	ix.epoch = 1
	return ix
}

// Stats summarises the index size.
type Stats struct {
	Nodes   int // live nodes, root excluded
	Entries int // (node, owner) pairs
	Owners  int // owners holding at least one block
	Bytes   int // approximate bytes held by the index's arenas and tables
}

// Stats returns current sizes. O(1).
func (ix *Index) Stats() Stats {
	return Stats{
		Nodes:   len(ix.nodes) - 1 - ix.nfree,
		Entries: ix.entries,
		Owners:  ix.own.live(),
		Bytes: cap(ix.nodes)*32 + ix.children.bytes() + ix.lookup.bytes() + ix.ents.bytes() +
			ix.own.bytes() + cap(ix.scratch)*8,
	}
}

// OwnerEntries returns how many blocks (nodes) o holds in any tier.
func (ix *Index) OwnerEntries(o kvwire.Owner) int {
	if i, ok := ix.own.lookup(o); ok {
		return ix.own.list[i].entries
	}
	return 0
}

// keysOf returns node n's entry keys (aliasing the slab; valid until the next mutation).
func (ix *Index) keysOf(n *node) []uint32 {
	return ix.ents.keys[n.off : n.off+uint32(n.count())]
}

// findEntry returns the position of owner idx among n's entries, or -1.
func (ix *Index) findEntry(n *node, idx uint32) int {
	keys := ix.keysOf(n)
	lo, hi := 0, len(keys)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ownerOf(keys[m]) < idx {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(keys) && ownerOf(keys[lo]) == idx {
		return lo
	}
	return -(lo + 1)
}

// touch records a change to node id's entries for the same-as-parent cache.
func (ix *Index) touch(id uint32) {
	if ix.epoch == ^uint32(0) {
		// Epoch wrap (after 4G changes): forget every cached flag and restart the clock.
		for i := range ix.nodes {
			ix.nodes[i].chg, ix.nodes[i].chk = 0, 0
		}
		ix.epoch = 1
	}
	ix.epoch++
	ix.nodes[id].chg = ix.epoch
}

// insertEntry adds a new entry for owner idx at position pos (from findEntry's -(pos+1)).
func (ix *Index) insertEntry(id uint32, pos int, key uint32, ext uint64) {
	n := &ix.nodes[id]
	c := n.count()
	if c == 0 {
		n.off = ix.ents.alloc(0)
		n.setClass(0)
	} else if c == 1<<n.class() {
		cls := n.class() + 1
		off := ix.ents.alloc(cls)
		copy(ix.ents.keys[off:], ix.ents.keys[n.off:n.off+uint32(c)])
		copy(ix.ents.ext[off:], ix.ents.ext[n.off:n.off+uint32(c)])
		ix.ents.release(n.off, n.class())
		n.off = off
		n.setClass(cls)
	}
	k := ix.ents.keys[n.off : n.off+uint32(c)+1]
	e := ix.ents.ext[n.off : n.off+uint32(c)+1]
	copy(k[pos+1:], k[pos:c])
	copy(e[pos+1:], e[pos:c])
	k[pos], e[pos] = key, ext
	n.setCount(c + 1)
	ix.entries++
	ix.own.list[key>>keyShift].entries++
	ix.touch(id)
}

// deleteEntry removes the entry at pos of node id, its lookup, and frees the owner index and
// empty leaf nodes as needed.
func (ix *Index) deleteEntry(id uint32, pos int) {
	n := &ix.nodes[id]
	c := n.count()
	k := ix.ents.keys[n.off : n.off+uint32(c)]
	e := ix.ents.ext[n.off : n.off+uint32(c)]
	idx, ext := ownerOf(k[pos]), e[pos]
	copy(k[pos:], k[pos+1:])
	copy(e[pos:], e[pos+1:])
	c--
	n.setCount(c)
	switch cls := n.class(); {
	case c == 0:
		ix.ents.release(n.off, cls)
		n.off = 0
		n.setClass(0)
	case cls > 0 && c <= 1<<(cls-2):
		// Shrink with hysteresis: only when a quarter full, so add/remove at a class boundary
		// does not copy every time.
		off := ix.ents.alloc(cls - 1)
		copy(ix.ents.keys[off:], k[:c])
		copy(ix.ents.ext[off:], e[:c])
		ix.ents.release(n.off, cls)
		n.off = off
		n.setClass(cls - 1)
	}
	ix.lookup.del(idx, ext)
	ix.entries--
	ix.touch(id)
	oi := &ix.own.list[idx]
	oi.entries--
	if oi.entries == 0 {
		ix.own.release(idx)
	}
	ix.pruneFrom(id)
}

// child returns the child of cur labelled h, or 0. Chains are usually allocated in order, so
// cur+1 is tried first: a live node whose parent and label match is the child (the pair is
// unique among live nodes), and this probe touches memory next to cur instead of a random
// table slot. Otherwise the children table answers.
func (ix *Index) child(cur uint32, h uint64) uint32 {
	if next := cur + 1; int(next) < len(ix.nodes) {
		n := &ix.nodes[next]
		if n.parent == cur && n.local == h && n.meta&classMask != freeMeta {
			return next
		}
	}
	return ix.children.get(cur, h)
}

// newNode creates a child of parent labelled local and links it into the children table.
func (ix *Index) newNode(parent uint32, local uint64) (uint32, bool) {
	var id uint32
	if ix.freeNode != 0 {
		id = ix.freeNode
		ix.freeNode = ix.nodes[id].parent
		ix.nfree--
	} else {
		if len(ix.nodes) >= 1<<32-1 {
			return 0, false
		}
		id = uint32(len(ix.nodes))
		ix.nodes = growLen(ix.nodes, 1)
	}
	ix.nodes[id] = node{local: local, parent: parent}
	ix.nodes[parent].nchild++
	ix.pending = append(ix.pending, id)
	ix.touch(id)
	return id, true
}

// flushChildren enters the nodes created by the current Store into the children table. Store
// defers these inserts so that their cache misses (random slots of a large table) overlap in one
// tight loop instead of stalling each block. Until the flush, a pending node is reachable only
// through Store's own cursor: it has no other children to look up and is never pruned (it holds
// the storing owner's entry, which no later block of the same event removes).
func (ix *Index) flushChildren() {
	var sink uint32
	for _, id := range ix.pending {
		n := &ix.nodes[id]
		sink += ix.children.touchSlot(n.parent, n.local)
	}
	ix.sink += sink
	for _, id := range ix.pending {
		n := &ix.nodes[id]
		ix.children.put(n.parent, n.local, id)
	}
	ix.pending = ix.pending[:0]
}

// pruneFrom frees id and then its ancestors while they are empty leaves. The doomed chain is
// collected first and its children-table slots touched in one pass, so the table misses of a
// long chain overlap.
func (ix *Index) pruneFrom(id uint32) {
	doomed := ix.prune[:0]
	for id != 0 {
		n := &ix.nodes[id]
		// Every node above the first is an ancestor that loses exactly one child.
		kids := n.nchild
		if len(doomed) > 0 {
			kids--
		}
		if n.count() != 0 || kids != 0 {
			break
		}
		doomed = append(doomed, id)
		id = n.parent
	}
	if len(doomed) == 0 {
		return
	}
	var sink uint32
	for _, d := range doomed {
		n := &ix.nodes[d]
		sink += ix.children.touchSlot(n.parent, n.local)
	}
	ix.sink += sink
	for _, d := range doomed {
		n := &ix.nodes[d]
		p := n.parent
		ix.children.del(p, n.local)
		ix.nodes[p].nchild--
		*n = node{parent: ix.freeNode, meta: freeMeta}
		ix.freeNode = d
		ix.nfree++
	}
	ix.prune = doomed[:0]
	if ix.entries == 0 && len(ix.nodes)-1 == ix.nfree {
		ix.resetStorage()
	}
}

// resetStorage releases every arena once the index is empty, so a drained index returns its
// memory to the runtime (the free lists would otherwise keep the high-water mark).
func (ix *Index) resetStorage() {
	ix.nodes = slices.Clip(ix.nodes[:1])
	ix.nodes[0] = node{}
	ix.freeNode, ix.nfree = 0, 0
	ix.children.reset()
	ix.lookup.reset()
	ix.ents.reset()
	ix.scratch = nil
	ix.pending = nil
	ix.prune = nil
}

// sameAsParent reports whether node id's (owner, tiers) list equals its parent's, using and
// refreshing the cached flag.
func (ix *Index) sameAsParent(id uint32) bool {
	n := &ix.nodes[id]
	p := &ix.nodes[n.parent]
	if n.chk > n.chg && n.chk > p.chg {
		return n.meta&sameFlag != 0
	}
	same := n.parent != 0 && slices.Equal(ix.keysOf(n), ix.keysOf(p))
	if same {
		n.meta |= sameFlag
	} else {
		n.meta &^= sameFlag
	}
	// Stamp with a fresh epoch so a later change (which bumps the epoch) invalidates it.
	ix.epoch++
	if ix.epoch == ^uint32(0) {
		ix.touch(id) // wraps and resets; the flag is simply recomputed next time
		return same
	}
	n.chk = ix.epoch
	return same
}
