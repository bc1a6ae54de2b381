package core

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/kvselect/kvselect/bus/kvevents"
)

// Benchmarks of KV-event ingestion inside the process (issue 3):
//
//   - BenchmarkKVIngestApply: decode + apply throughput through exactly the path a listener
//     uses (rankListener.Apply: kvevents decode, translate, Service.ApplyKVEvents under the
//     service lock), reported in block operations per second. Target ≥ 2M/s on one core:
//     run with -cpu 1.
//   - BenchmarkKVIndexMemory: memory per indexed (block, owner) entry measured through the
//     service (HeapInuse delta after GC, divided by the index's entry count). Target ≤ 120 B.
//
// Run: go test ./core -run '^$' -bench 'KVIngest|KVIndexMemory' -cpu 1 -benchtime 200ms

// ingestWorkload is a ring of encoded batches in steady state: batch i stores `stores` chains
// of `chain` blocks (fresh prompts) and removes the chains stored `window` batches earlier, so
// the index size stays constant once the ring has been applied once.
type ingestWorkload struct {
	payloads [][]byte
	ops      int // block operations (stored + removed blocks) per batch in steady state
}

func newIngestWorkload(batches, stores, chain, window int) ingestWorkload {
	w := ingestWorkload{ops: 2 * stores * chain}
	prompt := func(batch, j int) int { return (batch%batches)*stores + j }
	for i := range batches {
		var evs []kvevents.Event
		for j := range stores {
			evs = append(evs, ingestChain(prompt(i, j), chain))
		}
		old := (i - window + batches) % batches
		for j := range stores {
			ev := kvevents.Event{Kind: kvevents.KindBlockRemoved}
			for k := range chain {
				ev.BlockHashes = append(ev.BlockHashes, ingestHash(prompt(old, j), k))
			}
			evs = append(evs, ev)
		}
		w.payloads = append(w.payloads, ingestBatch(0, evs...))
	}
	return w
}

// ingestChain stores blocks [0, n) of prompt p; the tokens are generated per prompt so that
// each chain has distinct content (distinct radix nodes).
func ingestChain(p, n int) kvevents.Event {
	ev := kvevents.Event{Kind: kvevents.KindBlockStored, BlockSize: ingestBS, TokenIDs: make([]uint32, n*ingestBS)}
	for i := range ev.TokenIDs {
		ev.TokenIDs[i] = uint32(p)*7919 + uint32(i)
	}
	for i := range n {
		ev.BlockHashes = append(ev.BlockHashes, ingestHash(p, i))
	}
	return ev
}

// BenchmarkKVIngestApply: one op = one batch; blockops/s counts stored plus removed blocks
// (checked against the service's own counters after the run, so a batch that silently applied
// nothing would fail the benchmark rather than inflate it).
func BenchmarkKVIngestApply(b *testing.B) {
	for _, sh := range []struct {
		name                           string
		batches, stores, chain, window int
	}{
		// A busy vLLM step: a few requests finish prefill (4 blocks each), as many are evicted.
		{"step-8x4blk", 1024, 8, 4, 256},
		// Long prompts: one 64-block chain stored and one evicted per batch.
		{"long-1x64blk", 1024, 1, 64, 256},
		// Single-block batches: the per-batch overhead dominates.
		{"tiny-1x1blk", 4096, 1, 1, 1024},
	} {
		b.Run(sh.name, func(b *testing.B) {
			svc := ingestService(b)
			ingestRegister(b, svc, ingestSpec(1, "m", 1))
			rl := ingestRank(svc, 1, 0)
			w := newIngestWorkload(sh.batches, sh.stores, sh.chain, sh.window)
			for i, p := range w.payloads { // warm: reach the steady-state index size
				if err := rl.Apply(uint64(i), p, false); err != nil {
					b.Fatal(err)
				}
			}
			before := svc.Stats().KV
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := rl.Apply(uint64(i), w.payloads[i%len(w.payloads)], false); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			st := svc.Stats().KV
			ops := (st.StoredBlocks - before.StoredBlocks) + (st.RemovedBlocks - before.RemovedBlocks)
			if want := b.N * w.ops; ops != want {
				b.Fatalf("applied %d block operations, want %d (stats %+v)", ops, want, st)
			}
			b.ReportMetric(float64(ops)/b.Elapsed().Seconds(), "blockops/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ops), "ns/blockop")
		})
	}
}

// BenchmarkKVIndexMemory builds an index of about 1M (block, owner) entries through the Apply
// path and reports the heap it holds per entry. "unique": every owner stores its own chains
// (one entry per radix node); "shared8": eight owners store the same chains (eight entries per
// node, the prefix-sharing case the index is built for). Each iteration builds a fresh service;
// use -benchtime 1x.
func BenchmarkKVIndexMemory(b *testing.B) {
	for _, sh := range []struct {
		name                   string
		owners, chains, blocks int
	}{
		{"unique", 8, 8192, 16},
		{"unique-768k", 8, 6144, 16}, // not a power of two: shows arena growth slack
		{"shared8", 8, 8192, 16},
	} {
		b.Run(sh.name, func(b *testing.B) {
			var perEntry, estPerEntry float64
			for i := 0; i < b.N; i++ {
				perEntry, estPerEntry = indexMemory(b, sh.owners, sh.chains, sh.blocks, sh.name != "shared8")
			}
			b.ReportMetric(perEntry, "heapB/entry")
			b.ReportMetric(estPerEntry, "indexB/entry")
		})
	}
}

// indexMemory fills a fresh service and returns (HeapInuse delta, the index's own byte
// estimate) per indexed entry.
func indexMemory(b *testing.B, owners, chains, blocks int, unique bool) (float64, float64) {
	b.StopTimer()
	svc := ingestService(b)
	for o := range owners {
		ingestRegister(b, svc, ingestSpec(uint64(o+1), "m", 1))
	}
	rls := make([]*rankListener, owners)
	for o := range rls {
		rls[o] = ingestRank(svc, uint64(o+1), 0)
	}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	b.StartTimer()
	const perBatch = 32
	for c := 0; c < chains; c += perBatch {
		for o, rl := range rls {
			var evs []kvevents.Event
			for j := c; j < c+perBatch && j < chains; j++ {
				p := j
				if unique {
					p = o*chains + j
				}
				evs = append(evs, ingestChain(p, blocks))
			}
			if err := rl.Apply(uint64(c), ingestBatch(0, evs...), false); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The payloads were garbage as soon as Apply returned (the handler does not retain them),
	// so after a GC the heap delta is the index plus the service's small fixed state.
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	st := svc.Stats()
	entries, est := 0, 0
	for _, p := range st.Partitions {
		entries += p.IndexEntries
		est += p.IndexBytes
	}
	if want := owners * chains * blocks; entries != want {
		b.Fatalf("index holds %d entries, want %d", entries, want)
	}
	runtime.KeepAlive(svc)
	heap := float64(int64(m1.HeapInuse) - int64(m0.HeapInuse))
	b.StartTimer()
	return heap / float64(entries), float64(est) / float64(entries)
}

// BenchmarkKVIngestDecodeOnly isolates the decoder's share of BenchmarkKVIngestApply (same
// payloads, no engine), so the report can split the per-block cost.
func BenchmarkKVIngestDecodeOnly(b *testing.B) {
	w := newIngestWorkload(1024, 8, 4, 256)
	dec, batch := kvevents.NewDecoder(), kvevents.Batch{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := dec.Decode(w.payloads[i%len(w.payloads)], &batch); err != nil {
			b.Fatal(fmt.Errorf("decode: %w", err))
		}
	}
	b.ReportMetric(float64(b.N*w.ops)/b.Elapsed().Seconds(), "blockops/s")
}
