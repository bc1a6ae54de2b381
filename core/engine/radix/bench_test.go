package radix

import (
	"runtime"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// The benchmarks share one generated workload (≈1.2M entries over 512 owners); generating it is
// excluded from every timing.
var (
	benchOnce sync.Once
	benchWL   *workload
	benchIx   *Index
)

func benchSetup(b *testing.B) (*workload, *Index) {
	b.Helper()
	benchOnce.Do(func() {
		benchWL = genWorkload(defaultWL)
		benchIx = benchWL.build(b)
	})
	return benchWL, benchIx
}

// BenchmarkMatch: one Match of a 64-block next-turn prompt against the full workload index,
// cycling through 16k distinct prompts (so caches see a realistic spread of paths).
func BenchmarkMatch(b *testing.B) {
	w, ix := benchSetup(b)
	var m Match
	for _, q := range w.queries {
		ix.Match(q, &m) // warm the same-as-parent flags, as steady-state traffic would
	}
	owners := 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		ix.Match(w.queries[i%len(w.queries)], &m)
		owners += len(m.Owners)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(owners)/float64(b.N), "owners/op")
	b.ReportMetric(float64(w.entries), "entries")
}

// BenchmarkMatchHot matches the same prompt repeatedly (the cache-resident best case).
func BenchmarkMatchHot(b *testing.B) {
	w, ix := benchSetup(b)
	var m Match
	q := w.queries[0]
	ix.Match(q, &m)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		ix.Match(q, &m)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(len(m.Owners)), "owners/op")
}

// churn is a pool of store events for fresh conversations under the workload's system prompts,
// each by an owner that holds the prompt, so Store/Remove are measured against the full index.
func churnEvents(w *workload, n int) []storeEvent {
	var out []storeEvent
	for i := 0; len(out) < n; i++ {
		ev := w.events[i%len(w.events)]
		if ev.hasParent || ev.tier != kvwire.TierDevice {
			continue
		}
		// A new 16-block turn directly under the system prompt's last block.
		last := ev.blocks[len(ev.blocks)-1].External
		blocks := make([]StoredBlock, 16)
		prev := last
		for j := range blocks {
			l := uint64(i)<<20 | uint64(j) | 1<<62
			prev = extHash(prev, l)
			blocks[j] = StoredBlock{External: prev, Local: l}
		}
		out = append(out, storeEvent{o: ev.o, tier: kvwire.TierDevice, parent: last, hasParent: true, blocks: blocks})
	}
	return out
}

func removeAll(b *testing.B, ix *Index, evs []storeEvent, ext []uint64) {
	for _, ev := range evs {
		ext = ext[:0]
		for _, bl := range ev.blocks {
			ext = append(ext, bl.External)
		}
		if r, _ := ix.Remove(ev.o, ev.tier, ext); r != len(ext) {
			b.Fatalf("removed %d of %d", r, len(ext))
		}
	}
}

// BenchmarkStore: one op = one 16-block store event into the 1.2M-entry index; reports
// block operations per second.
func BenchmarkStore(b *testing.B) {
	w, ix := benchSetup(b)
	evs := churnEvents(w, 4096)
	ext := make([]uint64, 0, 16)
	blocks := 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu := -processCPU()
	i := 0
	for ; i < b.N; i++ {
		if i > 0 && i%len(evs) == 0 {
			b.StopTimer()
			cpu += processCPU()
			removeAll(b, ix, evs, ext)
			cpu -= processCPU()
			b.StartTimer()
		}
		ev := evs[i%len(evs)]
		if err := ix.Store(ev.o, ev.tier, ev.parent, ev.hasParent, ev.blocks); err != nil {
			b.Fatal(err)
		}
		blocks += len(ev.blocks)
	}
	b.StopTimer()
	cpu += processCPU()
	b.ReportMetric(float64(cpu)/float64(blocks), "cpu-ns/block")
	b.ReportMetric(float64(blocks)/b.Elapsed().Seconds(), "blocks/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(blocks), "ns/block")
	removeAll(b, ix, evs[:i%len(evs)], ext)
	if i%len(evs) == 0 && i > 0 {
		removeAll(b, ix, evs, ext)
	}
}

// BenchmarkRemove: one op = removing one 16-block chain (BlockRemoved) from the 1.2M-entry index,
// which frees its nodes; reports block operations per second.
func BenchmarkRemove(b *testing.B) {
	w, ix := benchSetup(b)
	evs := churnEvents(w, 4096)
	ext := make([]uint64, 0, 16)
	blocks := 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu := -processCPU()
	i := 0
	for ; i < b.N; i++ {
		if i%len(evs) == 0 {
			b.StopTimer()
			cpu += processCPU()
			for _, ev := range evs {
				if err := ix.Store(ev.o, ev.tier, ev.parent, ev.hasParent, ev.blocks); err != nil {
					b.Fatal(err)
				}
			}
			cpu -= processCPU()
			b.StartTimer()
		}
		ev := evs[i%len(evs)]
		ext = ext[:0]
		for _, bl := range ev.blocks {
			ext = append(ext, bl.External)
		}
		ix.Remove(ev.o, ev.tier, ext)
		blocks += len(ext)
	}
	b.StopTimer()
	cpu += processCPU()
	b.ReportMetric(float64(cpu)/float64(blocks), "cpu-ns/block")
	b.ReportMetric(float64(blocks)/b.Elapsed().Seconds(), "blocks/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(blocks), "ns/block")
	if r := i % len(evs); r != 0 {
		removeAll(b, ix, evs[r:], ext)
	}
}

// heapInUse returns HeapInuse after a full collection.
func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkMemoryPerEntry builds the workload index from scratch per iteration and reports the
// heap it holds per (block, owner) entry, measured with runtime.MemStats.
func BenchmarkMemoryPerEntry(b *testing.B) {
	w, _ := benchSetup(b)
	var perEntry, estimate float64
	for b.Loop() {
		before := heapInUse()
		ix := w.build(b)
		after := heapInUse()
		st := ix.Stats()
		perEntry = float64(after-before) / float64(st.Entries)
		estimate = float64(st.Bytes) / float64(st.Entries)
		runtime.KeepAlive(ix)
	}
	b.ReportMetric(perEntry, "B/entry")
	b.ReportMetric(estimate, "est-B/entry")
}

// BenchmarkDump: one op = a full Dump of the 1.07M-entry workload index; reports events emitted
// and blocks per event (single-owner runs are merged).
func BenchmarkDump(b *testing.B) {
	_, ix := benchSetup(b)
	var events, blocks int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		events, blocks = 0, 0
		ix.Dump(func(ev DumpEvent) bool {
			events++
			blocks += len(ev.Blocks)
			return true
		})
	}
	b.ReportMetric(float64(events), "events")
	b.ReportMetric(float64(blocks)/float64(events), "blocks/event")
}
