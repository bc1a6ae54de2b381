package fleet

import (
	"slices"
	"testing"
)

// TestFreeQueueEvictsHeadEvenWithUncachedFreeBlocks: vLLM keeps every free block, cached or
// not, on one free queue and allocates from its head (block_pool.py get_new_blocks). A cached
// block freed before an uncommitted one is evicted first; it is not spared while "empty"
// blocks remain. The eviction's Removed event is published when the step that evicted ends
// (scheduler.py update_from_output), not when the request is submitted.
func TestFreeQueueEvictsHeadEvenWithUncachedFreeBlocks(t *testing.T) {
	e := NewEngine(testSpec(16), 10, 4)
	// A (one full block, id 1) → queue b1 b2 b3 b0(1).
	drive(t, e, []arrival{{0, &Request{ID: 1, Prompt: 10, Output: 1, Blocks: []uint64{1}}}})
	// B (full block id 2 + a partial one in b2) frees tail first → queue b3 b0(1) b2 b1(2).
	drive(t, e, []arrival{{10, &Request{ID: 2, Prompt: 15, Output: 1, Blocks: []uint64{2, 3}}}})
	// D needs two blocks: b3 and b0, evicting block 1 although b2 is free and uncached.
	evs := e.Submit(20, &Request{ID: 3, Prompt: 20, Output: 1, Blocks: []uint64{7, 8}}, nil)
	for _, ev := range evs {
		if ev.Kind == Removed || ev.Kind == Stored {
			t.Fatalf("KV event %+v at submission; vLLM publishes it when the step ends", ev)
		}
	}
	if got := e.CachedPrefix([]uint64{1}, 11); got != 0 {
		t.Fatalf("block 1 still cached (%d tokens): the free queue's head was not evicted", got)
	}
	if got := e.CachedPrefix([]uint64{2, 3}, 21); got != 10 {
		t.Fatalf("block 2 cached %d tokens, want 10 (it was freed after block 1)", got)
	}
	evs = e.Advance(nil)
	var removed []uint64
	for _, ev := range evs {
		if ev.Kind == Removed {
			removed = append(removed, ev.Blocks...)
		}
	}
	if !slices.Equal(removed, []uint64{1}) {
		t.Fatalf("removed at step end %v, want [1]", removed)
	}
	checkCache(t, e)
}

// TestBlocksCommitWhenScheduled: vLLM caches a chunk's full blocks when it schedules the
// chunk (kv_cache_manager.py allocate_slots → cache_blocks with num_computed_tokens +
// num_new_tokens), so a request admitted later in the same step already hits them.
func TestBlocksCommitWhenScheduled(t *testing.T) {
	e := NewEngine(testSpec(16), 10, 100)
	a := &Request{ID: 1, Prompt: 150, Output: 1, Blocks: ids(1, 15)}
	b := &Request{ID: 2, Prompt: 150, Output: 1, Blocks: ids(1, 15)}
	e.Submit(0, a, nil)   // step 1: A's first 100 tokens
	e.Submit(1, b, nil)   // waits
	evs := e.Advance(nil) // step 2: A's last 50 (blocks 10–14 committed), then B
	for _, ev := range evs {
		if ev.Kind == Scheduled && ev.Req == 2 {
			if ev.CachedTokens != 140 {
				t.Fatalf("B found %d cached tokens, want 140 (A's blocks of this step count; hit capped at 149)", ev.CachedTokens)
			}
			checkCache(t, e)
			return
		}
	}
	t.Fatalf("B was not scheduled in step 2: %+v", evs)
}

// TestRecomputedLastBlockIsADuplicate: the prefix hit stops one token short of the prompt, so
// a repeat of a block-aligned prompt recomputes its last block. vLLM caches that block again
// without de-duplicating (block_pool.py: "We currently don't de-duplicate the blocks in the
// cache"): it emits BlockStored for it and the request holds its own copy.
func TestRecomputedLastBlockIsADuplicate(t *testing.T) {
	e := NewEngine(testSpec(16), 10, 100)
	a := &Request{ID: 1, Prompt: 50, Output: 1, Blocks: ids(1, 5)}
	b := &Request{ID: 2, Prompt: 50, Output: 1, Blocks: ids(1, 5)}
	evs := drive(t, e, []arrival{{0, a}, {10, b}})
	var bStored []uint64
	for _, ev := range evs {
		if ev.Kind == Stored && ev.Req == 2 {
			bStored = append(bStored, ev.Blocks...)
		}
	}
	if !slices.Equal(bStored, []uint64{5}) {
		t.Fatalf("B stored %v, want its recomputed copy of block 5", bStored)
	}
	if st := e.Stats(); st.CachedBlocks != 6 {
		t.Fatalf("%d cached blocks, want 6 (5 of A and B's duplicate)", st.CachedBlocks)
	}
	checkCache(t, e)
}
