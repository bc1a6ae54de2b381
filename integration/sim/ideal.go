package sim

import "github.com/kvselect/kvselect/integration/prefixcache"

// IdealHitRateAt is the token-level prefix reuse of one LRU prefix cache of the given capacity
// fed the trace in arrival order, with no queueing: what perfect routing could reach if the
// fleet's whole KV capacity (workers × per-worker capacity) were one cache, with no block held
// twice and no request waiting. It is the "ideal reuse at C blocks per worker" the routing
// quality targets are stated against; IdealHitRate is its infinite-capacity limit. A real
// fleet can end slightly above it (a request's own blocks stay pinned until it completes, and
// LRU order differs once requests queue), but routing that loses reuse stays well below.
func IdealHitRateAt(reqs []Request, capacity int) float64 {
	if capacity < 1 {
		return 0
	}
	c := prefixcache.New(capacity)
	var res prefixcache.StoreResult
	var hit, total float64
	for _, r := range reqs {
		k := c.Prefix(r.Blocks)
		c.Pin(r.Blocks[:k])
		c.Store(r.Blocks, k, &res)
		c.Release(r.Blocks)
		hit += float64(min(k*TraceBlockTokens, r.Input))
		total += float64(r.Input)
	}
	if total == 0 {
		return 0
	}
	return hit / total
}
