package prefixcache

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkCacheRequest: one request's cache work (prefix, pin, store with eviction, release)
// on a full 16k-block cache, prompts of 64 blocks sharing a random prefix of 0..63 blocks
// with one of 32 hot prompts.
func BenchmarkCacheRequest(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	hot := make([][]uint64, 32)
	for i := range hot {
		hot[i] = make([]uint64, 64)
		for j := range hot[i] {
			hot[i][j] = rng.Uint64()
		}
	}
	c := New(16384)
	var res StoreResult
	hs := make([]uint64, 64)
	b.ReportAllocs()
	for b.Loop() {
		h := hot[rng.IntN(len(hot))]
		k := rng.IntN(64)
		copy(hs, h[:k])
		for j := k; j < 64; j++ {
			hs[j] = rng.Uint64()
		}
		hit := c.Prefix(hs)
		c.Pin(hs[:hit])
		c.Store(hs, hit, &res)
		c.Release(hs)
	}
}
