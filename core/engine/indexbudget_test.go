package engine

import (
	"slices"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestIndexBudgetFlood: a rank of a worker that declared 4,096 blocks receives a flood of
// valid, distinct blocks; the rank's entries never exceed 4,096 × 1.25 = 5,120, the oldest
// blocks are the ones evicted (the newest chain still matches whole, the first is gone), and
// every eviction is counted. Without a declared size the MaxIndexBlocksPerRank budget acts.
func TestIndexBudgetFlood(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(4096)) }))
	o := kvwire.Owner{Worker: 1}
	p := e.parts[defKey]
	const chains, blocks = 60, 250 // 15,000 blocks stored
	for c := range chains {
		store(t, e, o, toks(c*10_000, blocks*4))
		if n := p.index.OwnerEntries(o); n > 5120 {
			t.Fatalf("after chain %d: %d entries, budget 5120", c, n)
		}
	}
	if n := p.index.OwnerEntries(o); n != 5120 {
		t.Fatalf("%d entries after the flood, want the budget 5120", n)
	}
	if ev := e.LimitStats().Counters.IndexEvicted; ev != chains*blocks-5120 {
		t.Fatalf("%d evictions counted, want %d", ev, chains*blocks-5120)
	}
	match := func(c int) uint64 {
		resp, err := e.Select(&SelectRequest{Prompt: Prompt{TokenIDs: toks(c*10_000, blocks*4)}}, t0)
		noErr(t, err)
		return resp.Overlap.LongestMatched / 4
	}
	if got := match(chains - 1); got != blocks {
		t.Fatalf("newest chain matches %d blocks, want %d", got, blocks)
	}
	if got := match(0); got != 0 {
		t.Fatalf("oldest chain still matches %d blocks", got)
	}
	// The store-order FIFO stays within twice the entries (+ slack) under re-stores.
	for range 40 {
		store(t, e, o, toks((chains-1)*10_000, blocks*4))
	}
	if so := p.order[o]; len(so.q)-so.head > 2*5120+1024 {
		t.Fatalf("store order holds %d hashes for 5120 entries", len(so.q)-so.head)
	}

	cfg := DefaultConfig()
	cfg.Limits.MaxIndexBlocksPerRank = 300
	e = newEngine(t, &cfg)
	mustUpsert(t, e, spec(1))
	for c := range 4 {
		store(t, e, o, toks(c*10_000, 100*4))
	}
	if n := e.parts[defKey].index.OwnerEntries(o); n != 300 {
		t.Fatalf("undeclared worker: %d entries, want 300", n)
	}
	// Clearing the rank drops its order too.
	e.ApplyKVEvents(o, []KVEvent{{Kind: KVCleared, Tier: kvwire.TierDevice}})
	if _, ok := e.parts[defKey].order[o]; ok {
		t.Fatal("store order kept after AllBlocksCleared")
	}
}

// TestStoreOrderCompact: compaction drops stores of hashes the rank no longer holds and, of a
// hash stored twice, keeps only the latest store, preserving order; without repeats it only
// filters.
func TestStoreOrderCompact(t *testing.T) {
	e := newEngine(t, nil)
	mustUpsert(t, e, spec(1, func(s *WorkerSpec) { s.TotalKVBlocks = ptr(uint64(4096)) }))
	o := kvwire.Owner{Worker: 1}
	p := e.parts[defKey]
	store(t, e, o, toks(0, 12))  // x1 x2 x3
	store(t, e, o, toks(100, 8)) // y1 y2
	so := p.order[o]
	held := slices.Clone(so.q[so.head:])
	if len(held) != 5 {
		t.Fatalf("store order %v, want 5 hashes", held)
	}
	const gone = 0x5eed // a hash the rank does not hold
	so.q = append(so.q, gone)
	so.compact(p, o)
	if got := so.q[so.head:]; !slices.Equal(got, held) {
		t.Fatalf("without repeats: %v, want %v", got, held)
	}
	so.q = append(so.q, held[0], gone) // x1 stored again, after y2
	so.compact(p, o)
	want := append(slices.Clone(held[1:]), held[0])
	if got := so.q[so.head:]; !slices.Equal(got, want) {
		t.Fatalf("with a repeat: %v, want %v (x1 at its latest store)", got, want)
	}
}
