package engine

// The eviction term of the kvselect policy (kvselect_cost.go): prefilling uncached tokens on a
// rank stores their blocks there, and on a rank whose cache is full that evicts as many blocks
// of other prompts — work someone recomputes later, in the common case that the evicted prefix
// comes back (a conversation's or an agent session's next turn). The term weighs a rank's own
// uncached prefill by its cache occupancy: the blocks the rank holds in the index (every tier)
// over the most blocks any rank of the partition holds, each rank's counted in blocks of the
// partition's smallest registered cache (fillScales: a rank with twice the cache is as full at
// twice the blocks). New sessions then go where they displace the least (SGLang's router sends
// unmatched requests to the worker with the smallest tree for the same reason), and a
// conversation is not moved onto a rank whose cache it would churn.
//
// A full cache is not always a valuable one. Under load every cache is about equally full, so
// occupancy differs between ranks by a few per cent and decides near ties, always against the
// fullest rank. A rank that is the fullest by a hair then takes no misses, its cache keeps the
// blocks it filled up with, and it stays the fullest. In simulation one worker of eight served
// 18 of 2,000 requests and sat idle for 1,470 of 1,524 s while the other seven thrashed (the
// SGLang-style 8B model's mixed agentic and system-prompt traffic on tight caches, seed 42: hit
// rate 56 % against llm-d's 80 %, mean TTFT 1.5× Dynamo's; README, "A cache nobody uses"). What
// such a rank would evict, nobody has asked for in a long while. The cold-cache discount scales
// occupancy by the rank's cache heat — the prompt tokens booked on it, cached (read) and
// uncached (stored), decayed over about one fleet capacity of traffic (load/heat.go) — against
// cold_cache_share (default ½) of the partition's mean:
//
//	occupancy' = occupancy · min(1, heat / (cold_cache_share · mean heat))
//
// A rank used at least that share of the mean pays the full term (where ranks are used alike
// almost nothing changes: the legacy model's overloaded agentic workload is within 5 % of before
// on each of its five seeds); a colder one pays in proportion, and a rank nobody has used in a
// window pays none, so misses refill it and its heat comes back to the mean. A rank serving a
// hot prompt's hits stores little but is in use, and is not discounted. The discount needs every
// rank's total_kv_blocks (the window); without them, or before any booking, there is none.
//
// The evicted blocks are recomputed on this rank when their prefix returns, and that recompute
// would delay the requests sharing the rank's steps then, as a miss's own work delays β now.
// eviction_miss_work (Config.EvictionMissWork) prices that: the term times (1 + min(β, cap)).
// It is off by default. At cap 1 (the pressure term's, whose overflow is as much a guess) it was
// better on both 8B engine models' matrices (seeds 42 and 7: cells above 1.25× the best rival
// 4 → 2 and 10 → 4, passing 98 → 102 and 105 → 112) and worse on the legacy model's overloaded
// agentic workload (median over 25 runs 0.76× → 1.51× SGLang's router, one trace 2.72×, which
// fails TestNoCollapseUnderOverload; hit rates held, one rank's mean TTFT was 4.8 s against
// 1.0–2.2 s on the others). README, "An eviction's recompute priced for the requests it delays".

// entriesOf returns, per candidate of p (tracker ordinal), the blocks the rank holds in the
// index: all zeros unless the kvselect policy's eviction term is on. The slice is scratch,
// valid until the next selection.
func (e *Engine) entriesOf(p *partition, w weights) []int32 {
	f := &e.scratch.fast
	ent := resize(f.entries, len(p.cands))
	f.entries = ent
	clear(ent)
	if _, ok := w.policy.(kvselectPolicy); ok && w.eviction > 0 {
		p.index.EntriesSlots(p.slotTable(), ent)
	}
	return ent
}

// invKVCapacity is 1/total_kv_blocks of the worker (per rank), 0 when unknown.
func (w *worker) invKVCapacity() float64 {
	if c := deref(w.spec.TotalKVBlocks, 0); c > 0 {
		return 1 / float64(c)
	}
	return 0
}

// fillScales sets the fillScale of every candidate of cs: smallest (the partition's smallest
// registered total_kv_blocks, partition.syncFillScales) over the rank's own, 1 for a rank that
// registered none (and for every rank while none did). Occupancy is then measured in blocks of
// the smallest cache, so a rank whose cache is twice as large counts as full at twice the
// blocks; where every rank registers the same capacity (or none) every scale is exactly 1 and
// occupancy is the raw block count's, bit for bit.
//
// Measured without it (integration/sim, 4 H100 + 4 H200 workers, the H200's cache 1,592 blocks
// against 773, Mooncake synthetic at round-robin's p99 + 1 s): the H200s, holding the most
// blocks, counted as the fullest ranks and every miss there paid the eviction term, though
// they evicted nothing; they took 120–222 requests each against the H100s' 736–952, hit rate
// 32.7 % against llm-d's 42.4 %, mean TTFT 1.13× llm-d's. With it: 41.5 %, 434 ms against
// llm-d's 441 (0.98×), and on that fleet's whole matrix 69 of 108 cells pass (68), geometric
// means 0.709 / 1.028 / 0.747 (0.755 / 1.048 / 0.793). Every single-preset table is unchanged
// bit for bit (the eight-H100 matrix compared cell by cell). Cost: within noise,
// BenchmarkFastSteps/kvselect_cost 21.6 → 20.1 µs (p = 0.58, ten runs alternated), 0 allocations.
func fillScales(cs []candidate, smallest uint64) {
	for i := range cs {
		cs[i].fillScale = 1
		if cs[i].kvBlocks > 0 {
			cs[i].fillScale = float64(smallest) / float64(cs[i].kvBlocks)
		}
	}
}

// occupancy is a rank's cache occupancy in [0, 1] relative to the partition's fullest rank:
// its indexed blocks × scale (its fillScale) × invMax (1/the most scaled blocks any rank holds,
// 0 when every rank is empty).
//
// Relative, not over total_kv_blocks: under load every cache is full, and occupancy over
// capacity is 1 everywhere — the term then only multiplies every miss, the same on every rank,
// and makes conversations stickier than their rank's queue warrants (in simulation that took an
// overloaded agentic workload from 1.3× to 5.5× the best baseline's mean TTFT). Relative
// occupancy keeps the term a comparison — a rank holding fewer blocks has more free or cold
// space and displaces less — and room for pinned blocks, which registered capacity does
// measure, is the pressure term's (kvselect_pressure.go).
func occupancy(entries int32, scale, invMax float64) float64 {
	return float64(float64(entries)*scale) * invMax
}

// coldFactor is the cold-cache discount of a rank with cache heat h (see the top of this
// file): min(1, h / coldRef), 1 when there is no reference (discount off, no window, or no
// heat yet).
func (k *kvselectTerms) coldFactor(h float64) float64 {
	if !(k.coldRef > 0) {
		return 1
	}
	return min(1, h/k.coldRef)
}
