package fleet

// kvCache is an engine's block pool with prefix caching, after vLLM v1's KVCacheManager and
// BlockPool: numBlocks blocks, each empty, private to one request (being computed, or holding
// decode tokens), or cached under a chained key. Cached blocks are reference counted; those
// with no reference sit on an LRU list (head.next is the least recently freed) and are
// evicted, least recently freed first, only when a block is needed and no empty one is left.
//
// Invariants: empty + private + len(entries) == numBlocks; an entry is on the LRU list iff
// its refs == 0; lru counts the entries on the list.
type kvCache struct {
	numBlocks int
	empty     int
	private   int
	entries   map[uint64]*cblock
	head      cblock // LRU sentinel
	lru       int
	free      []*cblock // recycled entries
	// evicted collects the block ids evicted since the owner last took them.
	evicted []uint64
}

type cblock struct {
	key        uint64 // chained key
	id         uint64 // the caller's block id (what events carry)
	refs       int
	prev, next *cblock
}

func newKVCache(numBlocks int) *kvCache {
	c := &kvCache{numBlocks: numBlocks, empty: numBlocks, entries: make(map[uint64]*cblock)}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

func (c *kvCache) unlink(b *cblock) {
	b.prev.next, b.next.prev = b.next, b.prev
	b.prev, b.next = nil, nil
	c.lru--
}

func (c *kvCache) pushMRU(b *cblock) {
	b.prev, b.next = c.head.prev, &c.head
	c.head.prev.next = b
	c.head.prev = b
	c.lru++
}

// prefix returns the cached entries of the leading run of keys (appended to out).
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

// available is how many blocks could be allocated now (empty or evictable).
func (c *kvCache) available() int { return c.empty + c.lru }

// ref takes a reference to a cached entry (off the LRU list if it was free).
func (c *kvCache) ref(b *cblock) {
	if b.refs == 0 {
		c.unlink(b)
	}
	b.refs++
}

// unref drops a reference; at zero the entry becomes the most recently freed.
func (c *kvCache) unref(b *cblock) {
	b.refs--
	if b.refs == 0 {
		c.pushMRU(b)
	}
}

// allocPrivate takes n blocks for a request's uncommitted tokens, evicting LRU entries when no
// empty block is left. It reports false (and changes nothing) when fewer than n are available.
func (c *kvCache) allocPrivate(n int) bool {
	if n > c.available() {
		return false
	}
	for c.empty < n {
		c.evictOne()
	}
	c.empty -= n
	c.private += n
	return true
}

// evictOne frees the least recently freed cached entry.
func (c *kvCache) evictOne() {
	b := c.head.next
	c.unlink(b)
	delete(c.entries, b.key)
	c.evicted = append(c.evicted, b.id)
	c.free = append(c.free, b)
	c.empty++
}

// freePrivate returns n private blocks to the empty pool.
func (c *kvCache) freePrivate(n int) {
	c.private -= n
	c.empty += n
}

// commit turns one private block, now fully computed, into the cached entry key (id): when
// another request committed the same key meanwhile the private block is freed and that entry
// referenced instead (stored is then false). The entry is returned referenced.
func (c *kvCache) commit(key, id uint64) (b *cblock, stored bool) {
	c.private--
	if b, ok := c.entries[key]; ok {
		c.empty++
		c.ref(b)
		return b, false
	}
	if n := len(c.free); n > 0 {
		b = c.free[n-1]
		c.free = c.free[:n-1]
		*b = cblock{key: key, id: id, refs: 1}
	} else {
		b = &cblock{key: key, id: id, refs: 1}
	}
	c.entries[key] = b
	return b, true
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

// used is the number of blocks held by requests (private or referenced).
func (c *kvCache) used() int { return c.numBlocks - c.empty - c.lru }
