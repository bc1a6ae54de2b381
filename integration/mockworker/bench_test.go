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
