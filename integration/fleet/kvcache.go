package fleet

// kvCache is an engine's block pool with prefix caching, after vLLM v1's BlockPool
// (vllm/v1/core/block_pool.py) and FreeKVCacheBlockQueue (vllm/v1/core/kv_cache_utils.py):
//
//   - numBlocks blocks, each free (refs 0) or held by requests (refs > 0). Every free block —
//     never used, freed uncommitted, or cached — sits on ONE free queue. Allocation pops the
//     queue's head whatever it holds: a cached block popped there is evicted (its key leaves
//     the cache, a Removed id is recorded), even if uncommitted free blocks wait further back.
//     So, as in vLLM, a freed uncommitted block ages in the queue like a cached one and the
//     cache keeps the most recently freed blocks, not "every cached block before any empty one".
//   - Freed blocks are appended at the tail in the order the caller frees them (the engine
//     frees a request's blocks tail first, so its deepest blocks are evicted first).
//   - A block is committed (gets a key) by the engine when the step that computes its last
//     token is scheduled. Like vLLM, committing never de-duplicates: two requests that compute
//     the same block each keep their own copy, both cached under the key; a lookup takes the
//     oldest copy, and evicting one copy leaves the other cached.
//
// Invariants: nfree counts the blocks on the free queue, which are exactly those with
// refs == 0; every committed block is in entries' chain for its key, and only those.
type kvCache struct {
	numBlocks int
	blocks    []cblock
	head      cblock // free-queue sentinel: head.next is evicted first
	nfree     int
	entries   map[uint64]*cblock // oldest cached copy of each key; copies chain via dup
	ncached   int                // committed blocks (copies counted)
	// evicted collects the block ids evicted since the owner last took them.
	evicted []uint64
}

type cblock struct {
	key        uint64 // chained key (valid when committed)
	id         uint64 // the caller's block id (what events carry)
	committed  bool
	refs       int
	prev, next *cblock // free-queue links (nil when held)
	dup        *cblock // next younger copy with the same key
}

func newKVCache(numBlocks int) *kvCache {
	c := &kvCache{numBlocks: numBlocks, blocks: make([]cblock, numBlocks), entries: make(map[uint64]*cblock)}
	c.head.prev, c.head.next = &c.head, &c.head
	for i := range c.blocks {
		c.pushTail(&c.blocks[i])
	}
	return c
}

func (c *kvCache) unlink(b *cblock) {
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
	c.nfree--
}

func (c *kvCache) pushTail(b *cblock) {
	b.prev, b.next = c.head.prev, &c.head
	c.head.prev.next = b
	c.head.prev = b
	c.nfree++
}

// prefix returns the cached blocks of the leading run of keys (appended to out).
func (c *kvCache) prefix(keys []uint64, out []*cblock) []*cblock {
	for _, k := range keys {
		b, ok := c.entries[k]
		if !ok {
			break
		}
		out = append(out, b)
	}
	return out
}

// available is how many blocks could be allocated now (vLLM's get_num_free_blocks).
func (c *kvCache) available() int { return c.nfree }

// ref takes a reference to a block (off the free queue if it was free: vLLM's touch).
func (c *kvCache) ref(b *cblock) {
	if b.refs == 0 {
		c.unlink(b)
	}
	b.refs++
}

// unref drops a reference; at zero the block joins the free queue's tail.
func (c *kvCache) unref(b *cblock) {
	b.refs--
	if b.refs == 0 {
		c.pushTail(b)
	}
}

// alloc appends n new blocks, each popped from the free queue's head (evicting it if it is
// cached), to out and returns it; ok is false, and nothing changes, when fewer than n are free.
func (c *kvCache) alloc(n int, out []*cblock) ([]*cblock, bool) {
	if n > c.nfree {
		return out, false
	}
	for range n {
		b := c.head.next
		c.unlink(b)
		if b.committed {
			c.evict(b)
		}
		b.refs = 1
		out = append(out, b)
	}
	return out, true
}

// evict drops committed block b from the cache.
func (c *kvCache) evict(b *cblock) {
	first := c.entries[b.key]
	if first == b {
		if b.dup != nil {
			c.entries[b.key] = b.dup
		} else {
			delete(c.entries, b.key)
		}
	} else {
		for p := first; p != nil; p = p.dup {
			if p.dup == b {
				p.dup = b.dup
				break
			}
		}
	}
	b.committed, b.dup = false, nil
	c.ncached--
	c.evicted = append(c.evicted, b.id)
}

// commit caches held block b under key (id is what events carry). A key already cached keeps
// its older copy first; b joins as a younger copy (vLLM does not de-duplicate).
func (c *kvCache) commit(b *cblock, key, id uint64) {
	b.key, b.id, b.committed, b.dup = key, id, true, nil
	c.ncached++
	first, ok := c.entries[key]
	if !ok {
		c.entries[key] = b
		return
	}
	for first.dup != nil {
		first = first.dup
	}
	first.dup = b
}

// takeEvicted returns the ids evicted since the last call in a new slice (nil if none).
func (c *kvCache) takeEvicted() []uint64 {
	if len(c.evicted) == 0 {
		return nil
	}
	out := make([]uint64, len(c.evicted))
	copy(out, c.evicted)
	c.evicted = c.evicted[:0]
	return out
}

// used is the number of blocks held by requests.
func (c *kvCache) used() int { return c.numBlocks - c.nfree }

// reset uncommits every block (all must be free) keeping the free-queue order.
func (c *kvCache) reset() {
	for i := range c.blocks {
		b := &c.blocks[i]
		b.committed, b.dup = false, nil
	}
	clear(c.entries)
	c.ncached = 0
}
