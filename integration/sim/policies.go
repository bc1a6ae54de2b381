package sim

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/zeebo/xxh3"
)

// Baseline policies. They consult only the View: the router's own in-flight and pending-prefill
// bookkeeping and the cache contents the delivered KV events show (late by the configured
// delay), as a deployed router would.

type randomPolicy struct{ rng *rand.Rand }

// NewRandom picks a uniformly random worker.
func NewRandom(seed uint64) Policy { return &randomPolicy{rand.New(rand.NewPCG(seed, 1))} }

func (p *randomPolicy) Name() string                        { return "random" }
func (p *randomPolicy) Pick(v *View, _ int, _ *Request) int { return p.rng.IntN(v.Workers()) }
func (p *randomPolicy) PrefillDone(int)                     {}
func (p *randomPolicy) Done(int)                            {}

type roundRobin struct{ next int }

// NewRoundRobin cycles through the workers.
func NewRoundRobin() Policy { return &roundRobin{} }

func (p *roundRobin) Name() string { return "round-robin" }
func (p *roundRobin) Pick(v *View, _ int, _ *Request) int {
	w := p.next % v.Workers()
	p.next++
	return w
}
func (p *roundRobin) PrefillDone(int) {}
func (p *roundRobin) Done(int)        {}

type leastLoaded struct{}

// NewLeastLoaded picks the worker with the fewest in-flight requests (then the least queued
// prefill work, then the lowest index).
func NewLeastLoaded() Policy { return leastLoaded{} }

func (leastLoaded) Name() string                        { return "least-loaded" }
func (leastLoaded) Pick(v *View, _ int, _ *Request) int { return leastLoadedOf(v, nil) }
func (leastLoaded) PrefillDone(int)                     {}
func (leastLoaded) Done(int)                            {}

// leastLoadedOf returns the least-loaded worker among those ok accepts (all when ok is nil).
func leastLoadedOf(v *View, ok func(int) bool) int {
	best := -1
	for w := range v.Workers() {
		if ok != nil && !ok(w) {
			continue
		}
		if best < 0 || v.InFlight(w) < v.InFlight(best) ||
			(v.InFlight(w) == v.InFlight(best) && v.PendingPrefillTokens(w) < v.PendingPrefillTokens(best)) {
			best = w
		}
	}
	return best
}

type prefixHash struct{ blocks int }

// NewPrefixHash routes by rendezvous hashing of the first n blocks (session/prefix affinity
// without load awareness).
func NewPrefixHash(n int) Policy { return prefixHash{n} }

func (p prefixHash) Name() string { return "prefix-hash" }
func (p prefixHash) Pick(v *View, _ int, r *Request) int {
	var key [8 * 4]byte
	n := min(p.blocks, len(r.Blocks), 3)
	for i := range n {
		binary.LittleEndian.PutUint64(key[8*i:], r.Blocks[i])
	}
	best, bestH := 0, uint64(0)
	for w := range v.Workers() {
		binary.LittleEndian.PutUint64(key[24:], uint64(w))
		if h := xxh3.Hash(key[:8*n]) ^ xxh3.Hash(key[24:32]); w == 0 || h > bestH {
			best, bestH = w, h
		}
	}
	return best
}
func (prefixHash) PrefillDone(int) {}
func (prefixHash) Done(int)        {}

type maxOverlap struct{}

// NewMaxOverlap picks the worker with the longest cached prefix per the KV events (ties: least
// loaded). It has no
// balance guard, which is its known failure on traces with a universal first block.
func NewMaxOverlap() Policy { return maxOverlap{} }

func (maxOverlap) Name() string { return "max-overlap" }
func (maxOverlap) Pick(v *View, _ int, r *Request) int {
	best, bestK := -1, -1
	for w := range v.Workers() {
		k := v.CachedPrefix(w, r)
		if k > bestK || (k == bestK && v.InFlight(w) < v.InFlight(best)) {
			best, bestK = w, k
		}
	}
	return best
}
func (maxOverlap) PrefillDone(int) {}
func (maxOverlap) Done(int)        {}

type sglangLike struct{}

// NewSGLangLike mimics SGLang's cache-aware router: when load is imbalanced (max − min in-flight
// > 32 and max > 1.5·min) route to the least loaded worker; otherwise, when the best prefix
// match covers more than 30 % of the prompt, route to it; otherwise to the least loaded.
func NewSGLangLike() Policy { return sglangLike{} }

func (sglangLike) Name() string { return "sglang-like" }
func (sglangLike) Pick(v *View, _ int, r *Request) int {
	lo, hi := v.InFlight(0), v.InFlight(0)
	for w := range v.Workers() {
		lo, hi = min(lo, v.InFlight(w)), max(hi, v.InFlight(w))
	}
	if hi-lo > 32 && float64(hi) > 1.5*float64(lo) {
		return leastLoadedOf(v, nil)
	}
	best, bestK := -1, -1
	for w := range v.Workers() {
		if k := v.CachedPrefix(w, r); k > bestK || (k == bestK && v.InFlight(w) < v.InFlight(best)) {
			best, bestK = w, k
		}
	}
	if float64(min(bestK*TraceBlockTokens, r.Input)) > 0.3*float64(r.Input) {
		return best
	}
	return leastLoadedOf(v, nil)
}
func (sglangLike) PrefillDone(int) {}
func (sglangLike) Done(int)        {}
