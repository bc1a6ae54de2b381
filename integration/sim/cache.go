package sim

// prefixCache is one worker's KV cache of prefix blocks with LRU eviction of unpinned blocks,
// modelled on vLLM's prefix caching: blocks in use by running requests are pinned (reference
// counted); released blocks stay cached and are evicted least-recently-used first when room is
// needed. Eviction happens only on insertion, so a cache may exceed capacity while every block
// is pinned.
//
// Invariants: every entry with refs == 0 is on the LRU list and no pinned entry is;
// len(entries) == pinned + lru length.
type prefixCache struct {
	capacity int
	entries  map[uint64]*cacheEntry
	head     cacheEntry // LRU sentinel: head.next is the least recently used
	pinned   int
	// sink receives the cache's KV events (may be nil).
	sink eventSink
}

// eventSink receives a worker's KV-cache events, as a vLLM engine would publish them.
type eventSink interface {
	stored(worker int, parent uint64, hasParent bool, blocks []uint64)
	removed(worker int, blocks []uint64)
}

type cacheEntry struct {
	id         uint64
	refs       int
	prev, next *cacheEntry
}

func newPrefixCache(capacity int, sink eventSink) *prefixCache {
	c := &prefixCache{capacity: capacity, entries: make(map[uint64]*cacheEntry), sink: sink}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

func (c *prefixCache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

// pushMRU appends e at the most-recently-used end.
func (c *prefixCache) pushMRU(e *cacheEntry) {
	e.prev, e.next = c.head.prev, &c.head
	c.head.prev.next = e
	c.head.prev = e
}

// prefix returns how many leading blocks are cached.
func (c *prefixCache) prefix(blocks []uint64) int {
	for i, b := range blocks {
		if _, ok := c.entries[b]; !ok {
			return i
		}
	}
	return len(blocks)
}

// pin marks blocks as in use (they must be cached).
func (c *prefixCache) pin(blocks []uint64) {
	for _, b := range blocks {
		e := c.entries[b]
		if e.refs == 0 {
			c.unlink(e)
			c.pinned++
		}
		e.refs++
	}
}

// insert caches blocks[from:] (blocks[:from] are cached and pinned by the caller), pinned, and
// publishes each contiguous run of newly stored blocks as one stored event whose parent is the
// block before the run (a block computed meanwhile by another request splits runs); it evicts
// unpinned blocks beyond capacity.
func (c *prefixCache) insert(worker int, blocks []uint64, from int, evicted *[]uint64) {
	start := -1 // first index of the current run of fresh blocks
	flush := func(end int) {
		if start >= 0 && c.sink != nil {
			var parent uint64
			if start > 0 {
				parent = blocks[start-1]
			}
			c.sink.stored(worker, parent, start > 0, blocks[start:end])
		}
		start = -1
	}
	for i := from; i < len(blocks); i++ {
		b := blocks[i]
		if e, ok := c.entries[b]; ok { // computed concurrently by another request
			flush(i)
			if e.refs == 0 {
				c.unlink(e)
				c.pinned++
			}
			e.refs++
			continue
		}
		if start < 0 {
			start = i
		}
		c.entries[b] = &cacheEntry{id: b, refs: 1}
		c.pinned++
	}
	flush(len(blocks))
	*evicted = (*evicted)[:0]
	for len(c.entries) > c.capacity && c.head.next != &c.head {
		e := c.head.next
		c.unlink(e)
		delete(c.entries, e.id)
		*evicted = append(*evicted, e.id)
	}
	if len(*evicted) > 0 && c.sink != nil {
		c.sink.removed(worker, *evicted)
	}
}

// release unpins blocks; fully released blocks become most recently used, tail first, so that
// deep suffix blocks are evicted before the shared prefix (as vLLM frees them).
func (c *prefixCache) release(blocks []uint64) {
	for i := len(blocks) - 1; i >= 0; i-- {
		e, ok := c.entries[blocks[i]]
		if !ok || e.refs == 0 {
			continue
		}
		e.refs--
		if e.refs == 0 {
			c.pinned--
			c.pushMRU(e)
		}
	}
}

// used returns the fraction of capacity pinned by running requests.
func (c *prefixCache) used() float64 {
	if c.capacity == 0 {
		return 1
	}
	return min(1, float64(c.pinned)/float64(c.capacity))
}
