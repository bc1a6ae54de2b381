package sim

// The server-side half of performance-anchors B1, measured the way Dynamo reports its indexer
// lookup: the Mooncake conversation trace's blocks stored in the index, spread round-robin over
// W single-rank workers, then each request's block-hash list selected in trace order (no
// tokens to hash: the trace carries hashes, as a frontend that hashes for itself would send).
// Anchor: Dynamo's CRTC lookup service time at W=64, p50 2.4 µs / p99 10.1 µs, and a naive Go
// tree's find at ≈ 0.5–1.5 µs p50. Ours includes the whole selection (match, load, cost, pick),
// not only the index walk. thread-cpu-ns/op is the CPU time of the benchmark's own thread per
// selection, insensitive to waiting for a core on a shared machine.
//
//	go test ./integration/sim -run x -bench SelectMooncake

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/internal/threadcpu"
)

func BenchmarkSelectMooncake(b *testing.B) {
	path := tracePath(b, "mooncake_conversation_trace.jsonl")
	reqs, err := LoadTrace(path, 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range []int{8, 64, 256} {
		b.Run("workers="+strconv.Itoa(w), func(b *testing.B) {
			p, err := NewEnginePolicy("kvselect", KVSelectConfig(), w, 1)
			if err != nil {
				b.Fatal(err)
			}
			for i := range reqs {
				p.Stored(i%w, 0, false, reqs[i].Blocks)
			}
			entries := p.eng.PartitionStats()[0].IndexEntries
			queries := make([]engine.SelectRequest, len(reqs))
			for i := range reqs {
				hs := make([]int64, len(reqs[i].Blocks))
				for j, h := range reqs[i].Blocks {
					hs[j] = int64(h)
				}
				isl := uint64(reqs[i].Input)
				queries[i].BlockHashes, queries[i].SequenceHashes, queries[i].ISLTokens = hs, hs, &isl
			}
			defer threadcpu.Lock()()
			lat := make([]time.Duration, 0, b.N)
			now := time.Unix(0, 0)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := threadcpu.Now()
			for i := 0; i < b.N; i++ {
				q := &queries[i%len(queries)]
				t := time.Now()
				if _, err := p.eng.Select(q, now); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t))
			}
			cpu = threadcpu.Now() - cpu
			b.StopTimer()
			b.ReportMetric(float64(cpu)/float64(b.N), "thread-cpu-ns/op")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(entries), "index-entries")
		})
	}
}
