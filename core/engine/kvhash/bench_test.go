package kvhash

import (
	"testing"
)

func benchBlockHashes(b *testing.B, bs int) {
	const blocks = 64
	tokens := make([]uint32, bs*blocks)
	for i := range tokens {
		tokens[i] = uint32(i * 7919)
	}
	dst := make([]uint64, 0, blocks)
	b.ReportAllocs()
	b.SetBytes(int64(4 * len(tokens)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst = BlockHashes(dst[:0], tokens, bs, Seed, false, nil)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*blocks), "ns/block")
}

// BenchmarkBlockHashes16 / 64: the indexer hot path for common block sizes.
func BenchmarkBlockHashes16(b *testing.B)   { benchBlockHashes(b, 16) }
func BenchmarkBlockHashes64(b *testing.B)   { benchBlockHashes(b, 64) }
func BenchmarkBlockHashes256(b *testing.B)  { benchBlockHashes(b, 256) }
func BenchmarkBlockHashes2048(b *testing.B) { benchBlockHashes(b, 2048) }

func BenchmarkSequenceHashes(b *testing.B) {
	blocks := make([]uint64, 64)
	for i := range blocks {
		blocks[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	dst := make([]uint64, 0, len(blocks))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		dst = SequenceHashes(dst[:0], blocks, Seed)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(blocks)), "ns/block")
}

func BenchmarkKeyedSeeds(b *testing.B) {
	k, _ := NewKeyedScheme(make([]byte, KeySize), "2026-01")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_, _ = k.Seeds("model-a", "tenant-a", 16, "cache-a", "adapter-a", false)
	}
}
