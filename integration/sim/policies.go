package sim

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/zeebo/xxh3"
)

// Baseline policies that need no lifecycle or KV events. Every baseline, here and in the
// policy_*.go files, says where it comes from and reads only what a deployed router observes:
// its own decisions, the request lifecycle, KV events, and scraped worker metrics
// (view_observed.go).

type randomPolicy struct{ rng *rand.Rand }

// NewRandom picks a uniformly random worker: what a Kubernetes Service in front of the workers
// does (kube-proxy's iptables mode picks a random endpoint), and SGLang router's random policy.
func NewRandom(seed uint64) Policy { return &randomPolicy{rand.New(rand.NewPCG(seed, 1))} }

func (p *randomPolicy) Name() string                        { return "random" }
func (p *randomPolicy) Pick(v *View, _ int, _ *Request) int { return p.rng.IntN(v.Workers()) }
func (p *randomPolicy) PrefillDone(int)                     {}
func (p *randomPolicy) Done(int)                            {}

type roundRobin struct{ next int }

// NewRoundRobin cycles through the workers: the classic load balancer, SGLang router's
// round_robin policy and Dynamo's round-robin router mode.
func NewRoundRobin() Policy { return &roundRobin{} }

func (p *roundRobin) Name() string { return "round-robin" }
func (p *roundRobin) Pick(v *View, _ int, _ *Request) int {
	w := p.next % v.Workers()
	p.next++
	return w
}
func (p *roundRobin) PrefillDone(int) {}
func (p *roundRobin) Done(int)        {}

type prefixHash struct{ blocks int }

// NewPrefixHash routes by rendezvous hashing of the first n (at most 3) blocks: prefix or
// session affinity without load awareness, the idea of SGLang model gateway's prefix_hash policy
// (a consistent-hash ring over the first prefix_token_count tokens) and of Envoy's ring-hash
// balancing on a session key. Unlike prefix_hash it has no load factor that diverts a hot key.
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
