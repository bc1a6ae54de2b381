package sim

import "github.com/kvselect/kvselect/integration/prefixcache"

// prefixCache is one simulated worker's KV cache: a prefixcache.Cache (vLLM-style LRU eviction
// of unpinned blocks, the same model kvselect-mockworker runs) that publishes what it stores and
// evicts to an eventSink, as a vLLM engine publishes KV events.
type prefixCache struct {
	*prefixcache.Cache
	// sink receives the cache's KV events (may be nil).
	sink eventSink
	res  prefixcache.StoreResult
}

// eventSink receives a worker's KV-cache events, as a vLLM engine would publish them.
type eventSink interface {
	stored(worker int, parent uint64, hasParent bool, blocks []uint64)
	removed(worker int, blocks []uint64)
}

func newPrefixCache(capacity int, sink eventSink) *prefixCache {
	return &prefixCache{Cache: prefixcache.New(capacity), sink: sink}
}

// insert caches blocks[from:] (blocks[:from] are cached and pinned by the caller), pinned, and
// publishes each contiguous run of newly stored blocks as one stored event whose parent is the
// block before the run (a block computed meanwhile by another request splits runs), then the
// blocks evicted to make room as one removed event. It returns the evicted blocks, LRU first,
// in a slice the cache reuses on the next insert.
func (c *prefixCache) insert(worker int, blocks []uint64, from int) (evicted []uint64) {
	c.Store(blocks, from, &c.res)
	if c.sink == nil {
		return c.res.Evicted
	}
	for _, run := range c.res.Runs {
		var parent uint64
		if run[0] > 0 {
			parent = blocks[run[0]-1]
		}
		c.sink.stored(worker, parent, run[0] > 0, blocks[run[0]:run[1]])
	}
	if len(c.res.Evicted) > 0 {
		c.sink.removed(worker, c.res.Evicted)
	}
	return c.res.Evicted
}
