package fleet

import (
	"container/heap"
	"slices"
)

// radixCache is the SGLang-style engine's KV pool and prefix tree, after SGLang's RadixCache
// (python/sglang/srt/mem_cache/radix_cache.py) and its token-to-KV pool allocator:
//
//   - The pool holds poolTokens tokens, allocated token by token (SGLang's default page_size
//     1): a running request holds exactly the tokens it has computed, not whole blocks.
//   - The tree caches prompt prefixes. A trace only names whole blocks, so a node here is one
//     page of bs tokens (one block id); SGLang's multi-page nodes split at match points, and
//     evicting such a node leaf page by leaf page frees the same tokens in the same order.
//     Children hang off their parent, so a cached page's ancestors are always cached.
//   - A request locks the nodes of its cached prefix (inc_lock_ref, which SGLang applies to
//     the whole root path). Only unlocked nodes are evictable; since a lock covers the path to
//     the root, every unlocked node is either a leaf or above unlocked leaves only.
//   - Eviction (RadixCache.evict) frees unlocked leaves, least recently accessed first, a
//     parent joining the candidates when its last child goes, until enough tokens are free.
//     (SGLang collects the leaves on each call; a heap kept current gives the same order.)
//     Access times are a logical clock advanced on every match and insert
//     (_match_prefix_helper and insert refresh last_access_time along the path).
//   - Inserting a page that is already cached (another request computed it meanwhile) frees
//     the inserter's copy and hands it the cached node (cache_unfinished_req's de-duplication).
//     Only new nodes are reported as stored (the KV-event publisher's BlockStored per new
//     node), evicted nodes as removed (BlockRemoved).
//
// Invariants: free + treeTokens + private == poolTokens, where private is the tokens the
// engine says requests hold outside the tree; evictable counts the unlocked nodes' tokens.
type radixCache struct {
	bs         int
	poolTokens int
	nodes      map[uint64]*rnode // by chained key
	private    int               // tokens held by requests outside the tree
	evictable  int               // tokens of unlocked nodes
	clock      uint64
	evicted    []uint64 // block ids evicted since takeEvicted
	// leaves holds the eviction candidates, unlocked nodes without children, kept up to date
	// on every lock, unlock, insert, match and eviction (rnode.hidx is a node's place in it).
	leaves nodeHeap
}

type rnode struct {
	key, id  uint64
	parent   *rnode // nil at the root level
	children int
	refs     int
	access   uint64
	hidx     int // index in radixCache.leaves, -1 when not a candidate
}

// update puts n in, or takes it out of, the eviction candidates after its refs, children or
// access changed.
func (c *radixCache) update(n *rnode) {
	want := n.refs == 0 && n.children == 0
	switch {
	case want && n.hidx < 0:
		heap.Push(&c.leaves, n)
	case !want && n.hidx >= 0:
		heap.Remove(&c.leaves, n.hidx)
	case want:
		heap.Fix(&c.leaves, n.hidx)
	}
}

func newRadixCache(bs, poolTokens int) *radixCache {
	return &radixCache{bs: bs, poolTokens: poolTokens, nodes: make(map[uint64]*rnode)}
}

func (c *radixCache) treeTokens() int { return len(c.nodes) * c.bs }

// free is the pool's unallocated tokens (the allocator's available_size).
func (c *radixCache) free() int { return c.poolTokens - c.treeTokens() - c.private }

// match returns the cached nodes of the leading run of keys (appended to out) and refreshes
// their access time.
func (c *radixCache) match(keys []uint64, out []*rnode) []*rnode {
	c.clock++
	for _, k := range keys {
		n, ok := c.nodes[k]
		if !ok {
			break
		}
		n.access = c.clock
		if n.hidx >= 0 {
			heap.Fix(&c.leaves, n.hidx)
		}
		out = append(out, n)
	}
	return out
}

// lock takes a reference to n.
func (c *radixCache) lock(n *rnode) {
	if n.refs == 0 {
		c.evictable -= c.bs
	}
	n.refs++
	c.update(n)
}

// unlock drops a reference to n.
func (c *radixCache) unlock(n *rnode) {
	n.refs--
	if n.refs == 0 {
		c.evictable += c.bs
		c.update(n)
	}
}

// insert caches the page with key and block id under parent (nil at the root), the caller's
// private copy of it becoming the tree's, and returns the node, locked for the caller, and
// whether it is new. A page already cached keeps its node; the caller's copy is freed.
func (c *radixCache) insert(parent *rnode, key, id uint64) (*rnode, bool) {
	c.clock++
	c.private -= c.bs
	if n, ok := c.nodes[key]; ok {
		n.access = c.clock
		c.lock(n)
		return n, false
	}
	n := &rnode{key: key, id: id, parent: parent, access: c.clock, refs: 1, hidx: -1}
	if parent != nil {
		parent.children++
		c.update(parent)
	}
	c.nodes[key] = n
	return n, true
}

// alloc takes n tokens for a request's private use, evicting if the pool is short; it fails,
// changing nothing but evictions, when even eviction cannot make room.
func (c *radixCache) alloc(n int) bool {
	if short := n - c.free(); short > 0 {
		c.evict(short)
	}
	if n > c.free() {
		return false
	}
	c.private += n
	return true
}

// release returns n private tokens to the pool.
func (c *radixCache) release(n int) { c.private -= n }

// evict frees at least tokens tokens of unlocked leaves, least recently accessed first, or
// all it can.
func (c *radixCache) evict(tokens int) {
	for freed := 0; freed < tokens && len(c.leaves) > 0; freed += c.bs {
		n := heap.Pop(&c.leaves).(*rnode)
		delete(c.nodes, n.key)
		c.evictable -= c.bs
		c.evicted = append(c.evicted, n.id)
		if p := n.parent; p != nil {
			p.children--
			c.update(p)
		}
	}
}

// takeEvicted returns the ids evicted since the last call in a new slice (nil if none).
func (c *radixCache) takeEvicted() []uint64 {
	if len(c.evicted) == 0 {
		return nil
	}
	out := slices.Clone(c.evicted)
	c.evicted = c.evicted[:0]
	return out
}

// reset empties the tree (no node may be locked).
func (c *radixCache) reset() {
	clear(c.nodes)
	clear(c.leaves)
	c.leaves = c.leaves[:0]
	c.evictable = 0
}

// nodeHeap orders eviction candidates: least recently accessed first, then by key (ties are
// pages matched in one walk; the key makes the order independent of map iteration).
type nodeHeap []*rnode

func (h nodeHeap) Len() int { return len(h) }
func (h nodeHeap) Less(i, j int) bool {
	if h[i].access != h[j].access {
		return h[i].access < h[j].access
	}
	return h[i].key < h[j].key
}
func (h nodeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}
func (h *nodeHeap) Push(x any) {
	n := x.(*rnode)
	n.hidx = len(*h)
	*h = append(*h, n)
}
func (h *nodeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	x.hidx = -1
	return x
}
