package core

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
)

// TestPendingLiveSetsBounded: partial live sets beyond the count or byte budget evict the
// oldest partial set (counted); oversized chunks are refused (counted); a complete set is
// still applied after a flood of partial ones.
func TestPendingLiveSetsBounded(t *testing.T) {
	r := newLiveSetRig(t)
	r.br.bounds.maxSets, r.br.bounds.maxBytes = 4, 1<<20
	r.mirror(t, "a", "a1", 1)

	// Count bound: 10 partial sets from 10 "senders", 4 kept: the last 4.
	for i := range 10 {
		r.br.applyLiveSet(chunk(fmt.Sprint("s", i), 1, 0, 2, "x"))
	}
	st := r.br.PendingLiveSetStats()
	if st.Sets != 4 || st.Evicted != 6 {
		t.Fatalf("after 10 partial sets with room for 4: %+v", st)
	}
	for i := 6; i < 10; i++ {
		if _, ok := r.br.pendingSets[liveSetKey{sender: fmt.Sprint("s", i), part: engine.PartitionKey{Model: engine.DefaultName, Group: engine.DefaultName}}]; !ok {
			t.Fatalf("set of s%d (among the newest) was evicted", i)
		}
	}

	// Byte bound: chunks of 4096 ids of 200 bytes (≈1 MiB with overhead per chunk): the budget
	// holds one such chunk, so every new set evicts the older ones.
	long := make([]string, maxChunkIDs)
	for i := range long {
		long[i] = fmt.Sprintf("%0200d", i)
	}
	for i := range 8 {
		r.br.applyLiveSet(chunk(fmt.Sprint("big", i), 1, 0, 3, long[:maxChunkIDs/2]...))
	}
	st = r.br.PendingLiveSetStats()
	if st.Bytes > r.br.bounds.maxBytes {
		t.Fatalf("pending bytes %d over the %d budget", st.Bytes, r.br.bounds.maxBytes)
	}
	if st.Evicted < 6+7 {
		t.Fatalf("stats %+v: the byte budget evicted too little", st)
	}
	// Oversized chunks are refused and change nothing.
	before := r.br.PendingLiveSetStats()
	r.br.applyLiveSet(chunk("a", 9, 0, 2, append(long, "one-too-many")...))
	r.br.applyLiveSet(chunk("a", 9, 0, maxLiveSetChunks+1))
	after := r.br.PendingLiveSetStats()
	if after.Rejected != before.Rejected+2 || after.Sets != before.Sets || after.Bytes != before.Bytes {
		t.Fatalf("oversized chunks: before %+v after %+v", before, after)
	}
	// A complete single-chunk set is applied regardless.
	r.br.applyLiveSet(chunk("a", 10, 0, 1))
	if got := r.live("a1"); len(got) != 0 {
		t.Fatalf("a's empty set did not release a1: %v", got)
	}
}

// TestPendingLiveSetMemoryMatchesAccounting: the byte estimate of partial sets is within a
// factor of two of what the heap grows by when they are held.
func TestPendingLiveSetMemoryMatchesAccounting(t *testing.T) {
	r := newLiveSetRig(t)
	r.br.bounds.maxSets, r.br.bounds.maxBytes = 1<<20, 1<<40
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for s := range 64 {
		ids := make([]string, liveSetChunk)
		for i := range ids {
			ids[i] = fmt.Sprintf("req-%d-%s", s*liveSetChunk+i, strings.Repeat("x", 24))
		}
		r.br.applyLiveSet(chunk(fmt.Sprint("s", s), 1, 0, 2, ids...))
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	grew := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	acct := r.br.PendingLiveSetStats().Bytes
	t.Logf("accounted %d bytes, heap grew %d bytes", acct, grew)
	if acct*2 < grew || grew*2 < acct {
		t.Fatalf("accounted %d bytes, heap grew %d: off by more than 2x", acct, grew)
	}
}
