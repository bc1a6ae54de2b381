package sim

import (
	"fmt"
	"slices"
	"testing"
)

// recSink records a cache's events.
type recSink struct{ events []string }

func (r *recSink) stored(w int, parent uint64, hasParent bool, blocks []uint64) {
	r.events = append(r.events, fmt.Sprintf("stored w%d parent=%d/%t %v", w, parent, hasParent, blocks))
}
func (r *recSink) removed(w int, blocks []uint64) {
	r.events = append(r.events, fmt.Sprintf("removed w%d %v", w, blocks))
}

// TestCacheStoredRuns: fresh blocks split by a block another request computed meanwhile are
// published as separate runs, each with the parent that precedes it (found in review: they were
// published as one chain with a wrong parent).
func TestCacheStoredRuns(t *testing.T) {
	var rec recSink
	c := newPrefixCache(100, &rec)
	c.insert(0, []uint64{3}, 0) // another request computed block 3
	rec.events = nil
	c.insert(0, []uint64{1, 2, 3, 4, 5}, 0)
	want := []string{"stored w0 parent=0/false [1 2]", "stored w0 parent=3/true [4 5]"}
	if !slices.Equal(rec.events, want) {
		t.Fatalf("events %q, want %q", rec.events, want)
	}
}

// TestCacheEvictsLRUTailFirst: released blocks are evicted least recently used first, deep
// suffix blocks before the shared prefix, and pinned blocks never.
func TestCacheEvictsLRUTailFirst(t *testing.T) {
	var rec recSink
	c := newPrefixCache(4, &rec)
	c.insert(0, []uint64{1, 2, 3}, 0)
	c.Release([]uint64{1, 2, 3})
	ev := c.insert(0, []uint64{7, 8}, 0) // pinned; needs one eviction
	if !slices.Equal(ev, []uint64{3}) {
		t.Fatalf("evicted %v, want the deepest suffix block 3", ev)
	}
	if c.Prefix([]uint64{1, 2, 3}) != 2 {
		t.Fatal("the shared prefix was evicted before the suffix")
	}
	ev = c.insert(0, []uint64{9, 10, 11}, 0) // only 1 and 2 are evictable
	if !slices.Equal(ev, []uint64{2, 1}) || c.Len() != 5 {
		t.Fatalf("evicted %v, %d entries; pinned blocks must stay (over capacity)", ev, c.Len())
	}
}
