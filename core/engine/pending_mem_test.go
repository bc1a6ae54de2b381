package engine

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// TestPendingEntrySizeClass: the entry struct is in the allocation size class pendingOverhead
// charges for it (Go's classes around it: 224, 240, 256), so a field added to or removed from
// pendingSelection cannot change its memory without the charge being re-measured.
func TestPendingEntrySizeClass(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("pendingOverhead is measured on 64-bit platforms")
	}
	if n := unsafe.Sizeof(pendingSelection{}); n <= 224 || n > pendingEntryClass {
		t.Fatalf("pendingSelection is %d bytes, outside the %d-byte size class pendingOverhead charges: re-measure it", n, pendingEntryClass)
	}
}

// TestPendingBytesMatchHeap: the pending cache's byte accounting measures what it holds: the
// heap grows by what the cache charges (within ±25%) when it is filled with selections of
// several sizes, from token prompts and from explicit hashes. (Issue 15 measured 626 MiB
// resident against a 256 MiB budget.)
func TestPendingBytesMatchHeap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		blocks int
		tokens bool
	}{{"tokens-small", 4000, 8, true}, {"tokens-large", 300, 2000, true}, {"hashes", 1000, 500, false}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.SelectionCacheMaxEntries, cfg.SelectionCacheMaxBytes = 1<<30, 1<<40
			e := newEngine(t, &cfg)
			mustUpsert(t, e, spec(1))
			req := func(i int) *SelectRequest {
				r := &SelectRequest{SelectionID: ptr(fmt.Sprintf("selection-%06d", i)), ExpectedOutputTokens: ptr(uint32(10))}
				if tc.tokens {
					r.TokenIDs = toks(i*100_000, tc.blocks*4)
				} else {
					h := make([]int64, tc.blocks)
					for j := range h {
						h[j] = int64(i*100_000 + j)
					}
					r.BlockHashes, r.SequenceHashes, r.ISLTokens = h, h, ptr(uint64(tc.blocks*4))
				}
				return r
			}
			// Warm the engine's scratch buffers so they are not counted as the cache's.
			if _, err := e.Select(&SelectRequest{Prompt: req(0).Prompt}, t0); err != nil {
				t.Fatal(err)
			}
			before := heapAfterGC()
			for i := range tc.n { // each request is garbage once selected: only the cache stays
				if _, err := e.Select(req(i), t0); err != nil {
					t.Fatal(err)
				}
			}
			after := heapAfterGC()
			grown, charged := float64(after-before), float64(e.pending.bytes)
			t.Logf("%s: %d entries, charged %.1f MiB, heap grew %.1f MiB (ratio %.2f)", tc.name, e.pending.len(), charged/(1<<20), grown/(1<<20), grown/charged)
			if e.pending.len() != tc.n || grown > 1.25*charged || grown < 0.8*charged {
				t.Fatalf("heap grew %.0f bytes for %.0f charged (%d entries)", grown, charged, e.pending.len())
			}
			runtime.KeepAlive(e)
		})
	}
}

func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
