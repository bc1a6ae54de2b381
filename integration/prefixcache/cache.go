// Package prefixcache models an inference engine's KV prefix cache for kvselect's test workers
// (integration/mockworker) and simulator (integration/sim), so both evict exactly alike.
package prefixcache

// Cache is one rank's KV cache of full blocks, keyed by engine block hash, with vLLM-style
// prefix caching: blocks in use by running requests are pinned (reference counted); released
// blocks stay cached on an LRU list and are evicted least-recently-used first when room is
// needed. Eviction happens only when blocks are stored, and never touches pinned blocks, so the
// cache may hold more than capacity blocks while everything is pinned.
//
// Invariants: every entry with refs == 0 is on the LRU list and no pinned entry is;
// len(entries) == pinned + (length of the LRU list).
//
// A Cache is not safe for concurrent use; its owner serialises calls.
type Cache struct {
	capacity int
	entries  map[uint64]*cacheEntry
	head     cacheEntry // LRU sentinel: head.next is the least recently used
	pinned   int
	// overcommits counts store calls that left the cache above capacity.
	overcommits uint64
	// gen numbers store calls, to tell blocks created by the current call apart.
	gen uint64
	// free holds evicted entries for reuse, so a full cache stores without allocating them.
	free []*cacheEntry
}

type cacheEntry struct {
	hash       uint64
	refs       int
	gen        uint64 // Store call that created the entry
	prev, next *cacheEntry
}

// New returns an empty cache that holds capacity blocks before it evicts.
func New(capacity int) *Cache {
	c := &Cache{capacity: capacity, entries: make(map[uint64]*cacheEntry)}
	c.head.prev, c.head.next = &c.head, &c.head
	return c
}

func (c *Cache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

// pushMRU appends e at the most-recently-used end.
func (c *Cache) pushMRU(e *cacheEntry) {
	e.prev, e.next = c.head.prev, &c.head
	c.head.prev.next = e
	c.head.prev = e
}

// prefix returns how many leading hashes are cached.
func (c *Cache) Prefix(hashes []uint64) int {
	for i, h := range hashes {
		if _, ok := c.entries[h]; !ok {
			return i
		}
	}
	return len(hashes)
}

// pinEntry adds a reference to e, taking it off the LRU list if it was unpinned.
func (c *Cache) pinEntry(e *cacheEntry) {
	if e.refs == 0 {
		c.unlink(e)
		c.pinned++
	}
	e.refs++
}

// Pin adds a reference to each cached hash (uncached ones are ignored).
func (c *Cache) Pin(hashes []uint64) {
	for _, h := range hashes {
		if e, ok := c.entries[h]; ok {
			c.pinEntry(e)
		}
	}
}

// StoreResult is what one store did: evicted hashes in eviction order (LRU first) and the
// newly cached blocks as [start, end) index ranges into the stored hash list.
type StoreResult struct {
	Evicted []uint64
	Runs    [][2]int
}

// store caches hashes[from:], each occurrence pinned once (hashes[:from] are already pinned by
// the caller). Hashes already cached (another request computed them meanwhile) are pinned, not
// re-stored. Room for the new blocks is made first by evicting unpinned LRU blocks, so a new
// block never evicts a block pinned by this call. res receives what was evicted and the runs
// of newly stored blocks; its slices are reused across calls.
//
// A hash repeated within hashes (impossible for a chained hash short of a collision) is stored
// once; the repeat is pinned again and ends the run, so every run is a valid parent chain.
func (c *Cache) Store(hashes []uint64, from int, res *StoreResult) {
	res.Evicted, res.Runs = res.Evicted[:0], res.Runs[:0]
	c.gen++
	need := 0
	for _, h := range hashes[from:] {
		if e, ok := c.entries[h]; ok {
			c.pinEntry(e)
		} else {
			need++
		}
	}
	for len(c.entries)+need > c.capacity && c.head.next != &c.head {
		e := c.head.next
		c.unlink(e)
		delete(c.entries, e.hash)
		res.Evicted = append(res.Evicted, e.hash)
		c.free = append(c.free, e)
	}
	if need == 0 {
		return
	}
	start := -1
	for i := from; i < len(hashes); i++ {
		h := hashes[i]
		if e, ok := c.entries[h]; ok {
			if e.gen == c.gen { // repeat of a block stored by this call
				c.pinEntry(e)
			}
			if start >= 0 {
				res.Runs = append(res.Runs, [2]int{start, i})
				start = -1
			}
			continue
		}
		c.entries[h] = c.newEntry(h)
		c.pinned++
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		res.Runs = append(res.Runs, [2]int{start, len(hashes)})
	}
	if len(c.entries) > c.capacity {
		c.overcommits++
	}
}

// newEntry returns a pinned entry for h created by the current store call, reusing an evicted
// entry when one is free.
func (c *Cache) newEntry(h uint64) *cacheEntry {
	if n := len(c.free); n > 0 {
		e := c.free[n-1]
		c.free = c.free[:n-1]
		*e = cacheEntry{hash: h, refs: 1, gen: c.gen}
		return e
	}
	return &cacheEntry{hash: h, refs: 1, gen: c.gen}
}

// Release drops one reference from each hash, tail first; blocks whose last reference goes
// become most recently used in that order, so a request's deepest blocks are evicted first.
func (c *Cache) Release(hashes []uint64) {
	for i := len(hashes) - 1; i >= 0; i-- {
		e, ok := c.entries[hashes[i]]
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

// Clear drops every block; it reports false (and changes nothing) while any block is pinned.
func (c *Cache) Clear() bool {
	if c.pinned > 0 {
		return false
	}
	clear(c.entries)
	c.free = nil
	c.head.prev, c.head.next = &c.head, &c.head
	return true
}

// Used returns the fraction of capacity pinned by running requests, capped at 1.
func (c *Cache) Used() float64 {
	if c.capacity <= 0 {
		return 1
	}
	return min(1, float64(c.pinned)/float64(c.capacity))
}

// Len returns the number of cached blocks, pinned or not.
func (c *Cache) Len() int { return len(c.entries) }

// Overcommits returns how many Store calls left the cache above capacity (everything pinned).
func (c *Cache) Overcommits() uint64 { return c.overcommits }

// Capacity returns the number of blocks the cache holds before it evicts.
func (c *Cache) Capacity() int { return c.capacity }

// Pinned returns the number of blocks in use by running requests.
func (c *Cache) Pinned() int { return c.pinned }
