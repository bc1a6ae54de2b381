package mockworker

import (
	"context"
	"math/rand/v2"
	"testing"
)

// BenchmarkEngineHashes: hashing a 1024-token prompt into 64 chained engine block hashes.
func BenchmarkEngineHashes(b *testing.B) {
	p := tokens(1, 1024)
	dst := make([]uint64, 0, 64)
	b.ReportAllocs()
	b.SetBytes(int64(len(p) * 4))
	for b.Loop() {
		dst = EngineHashes(dst[:0], p, 16, DefaultHashSeed)
	}
}

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
	c := newBlockCache(16384)
	var res storeResult
	hs := make([]uint64, 64)
	b.ReportAllocs()
	for b.Loop() {
		h := hot[rng.IntN(len(hot))]
		k := rng.IntN(64)
		copy(hs, h[:k])
		for j := k; j < 64; j++ {
			hs[j] = rng.Uint64()
		}
		hit := c.prefix(hs)
		c.pin(hs[:hit])
		c.store(hs, hit, &res)
		c.release(hs)
	}
}

// BenchmarkServe: a whole request through Worker.Serve with an instant clock (no sleeping):
// hashing, cache, event encoding and a PUB send with no subscriber. 1024-token prompts, half
// of them sharing a 512-token prefix; 4 decode tokens.
func BenchmarkServe(b *testing.B) {
	w := newWorker(b, Config{BlockSize: 16, NumGPUBlocks: 16384, Clock: NewInstantClock(epoch0), ReplayBuffer: 1024})
	rng := rand.New(rand.NewPCG(3, 4))
	shared := randTokens(rng, 512)
	p := make([]uint32, 1024)
	ctx := context.Background()
	req := Request{PromptTokenIDs: p, MaxTokens: intp(4)}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			copy(p, shared)
		} else {
			copy(p, randTokens(rng, 512))
		}
		copy(p[512:], randTokens(rng, 512))
		if _, err := w.Serve(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
