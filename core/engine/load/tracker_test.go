package load

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

var (
	w1r0 = kvwire.Owner{Worker: 1, Rank: 0}
	w1r1 = kvwire.Owner{Worker: 1, Rank: 1}
	w2r0 = kvwire.Owner{Worker: 2, Rank: 0}
)

// newTestTracker returns a tracker with the given owners known.
func newTestTracker(t *testing.T, owners ...kvwire.Owner) *Tracker {
	t.Helper()
	tr := NewTracker()
	for _, o := range owners {
		tr.AddOwner(o)
	}
	return tr
}

// mustCheck fails the test when the tracker's invariants are broken.
func mustCheck(t *testing.T, tr *Tracker) {
	t.Helper()
	if err := tr.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

func wantLoad(t *testing.T, tr *Tracker, o kvwire.Owner, prefill, blocks uint64, requests int) {
	t.Helper()
	got := tr.Load(o)
	got.PendingPrefills, got.PrefillSquares, got.ContextTokens = 0, 0, 0 // checked by TestPrefillQueueAggregates and the reference
	want := RankLoad{Owner: o, ActivePrefillTokens: prefill, ActiveBlocks: blocks, ActiveRequests: requests}
	if got != want {
		t.Fatalf("Load(%v) = %+v, want %+v", o, got, want)
	}
	mustCheck(t, tr)
}

// TestSpecReplicaSyncExample is the spec's replica-sync case (§6): booking 4
// tokens with block size 4 shows (requests 1, blocks 1, prefill 4); after
// prefill complete (1, 1, 0); after free (0, 0, 0).
func TestSpecReplicaSyncExample(t *testing.T) {
	tr := newTestTracker(t, w1r0)
	if err := tr.Add(Booking{ID: "sel-1", Owner: w1r0, Hashes: chain([]uint64{7}), PrefillTokens: 4}); err != nil {
		t.Fatal(err)
	}
	wantLoad(t, tr, w1r0, 4, 1, 1)
	if err := tr.PrefillComplete("sel-1"); err != nil {
		t.Fatal(err)
	}
	wantLoad(t, tr, w1r0, 0, 1, 1)
	if err := tr.Free("sel-1"); err != nil {
		t.Fatal(err)
	}
	wantLoad(t, tr, w1r0, 0, 0, 0)
}

func TestAddErrors(t *testing.T) {
	tr := newTestTracker(t, w1r0)
	if err := tr.Add(Booking{ID: "a", Owner: w1r0, Hashes: chain([]uint64{1, 2}), PrefillTokens: math.MaxUint64 - 1}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		b    Booking
		want error
	}{
		{"duplicate id", Booking{ID: "a", Owner: w1r0}, ErrDuplicate},
		{"duplicate id on another owner", Booking{ID: "a", Owner: w2r0}, ErrDuplicate},
		{"unknown owner", Booking{ID: "b", Owner: w2r0, Hashes: chain([]uint64{1})}, ErrUnknownOwner},
		{"unknown rank of a known worker", Booking{ID: "b", Owner: w1r1}, ErrUnknownOwner},
		{"prefill overflow", Booking{ID: "b", Owner: w1r0, PrefillTokens: 2}, ErrOverflow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tr.Loads(nil)
			err := tr.Add(tc.b)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Add = %v, want %v", err, tc.want)
			}
			if after := tr.Loads(nil); !slices.Equal(before, after) || tr.Len() != 1 {
				t.Fatalf("failed Add changed state: %+v -> %+v", before, after)
			}
			mustCheck(t, tr)
		})
	}
}

func TestLifecycleErrors(t *testing.T) {
	tr := newTestTracker(t, w1r0)
	if err := tr.Add(Booking{ID: "live", Owner: w1r0, Hashes: chain([]uint64{1})}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"prefill complete unknown", func() error { return tr.PrefillComplete("nope") }, ErrNotFound},
		{"output block unknown", func() error { return tr.OutputBlock("nope", 1, 0, false) }, ErrNotFound},
		{"free unknown", func() error { return tr.Free("nope") }, ErrNotFound},
		{"fraction negative", func() error { return tr.OutputBlock("live", 1, -0.1, true) }, ErrInvalidFraction},
		{"fraction above one", func() error { return tr.OutputBlock("live", 1, 1.0001, true) }, ErrInvalidFraction},
		{"fraction NaN", func() error { return tr.OutputBlock("live", 1, math.NaN(), true) }, ErrInvalidFraction},
		{"fraction +Inf", func() error { return tr.OutputBlock("live", 1, math.Inf(1), true) }, ErrInvalidFraction},
		{"fraction ignored without hasFraction", func() error { return tr.OutputBlock("live", 1, math.NaN(), false) }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tr.Load(w1r0)
			err := tc.call()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("got %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if after := tr.Load(w1r0); after != before {
				t.Fatalf("failed call changed load: %+v -> %+v", before, after)
			}
			mustCheck(t, tr)
		})
	}
	// Double free: the second one is NotFound.
	if err := tr.Free("live"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Free("live"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Free = %v", err)
	}
}

func TestPrefillCompleteIdempotent(t *testing.T) {
	tr := newTestTracker(t, w1r0)
	for _, b := range []Booking{
		{ID: "a", Owner: w1r0, PrefillTokens: 100},
		{ID: "b", Owner: w1r0, PrefillTokens: 30},
		{ID: "c", Owner: w1r0, PrefillTokens: 0},
	} {
		if err := tr.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	wantLoad(t, tr, w1r0, 130, 0, 3)
	for range 3 {
		if err := tr.PrefillComplete("a"); err != nil {
			t.Fatal(err)
		}
		wantLoad(t, tr, w1r0, 30, 0, 3)
	}
	if err := tr.PrefillComplete("c"); err != nil {
		t.Fatal(err)
	}
	wantLoad(t, tr, w1r0, 30, 0, 3)
	if err := tr.Free("b"); err != nil { // free drops outstanding prefill
		t.Fatal(err)
	}
	wantLoad(t, tr, w1r0, 0, 0, 2)
}

// TestPromptDedup: prompt blocks are de-duplicated per owner, never across
// owners.
func TestPromptDedup(t *testing.T) {
	sys := []uint64{1, 2, 3, 4}
	p := func(tail ...uint64) []uint64 { return chain(append(slices.Clone(sys), tail...)) }
	tests := []struct {
		name     string
		bookings []Booking
		want     map[kvwire.Owner]uint64 // ActiveBlocks
	}{
		{"single", []Booking{{ID: "a", Owner: w1r0, Hashes: p(5)}}, map[kvwire.Owner]uint64{w1r0: 5}},
		{"identical prompts share", []Booking{
			{ID: "a", Owner: w1r0, Hashes: p(5)}, {ID: "b", Owner: w1r0, Hashes: p(5)},
		}, map[kvwire.Owner]uint64{w1r0: 5}},
		{"shared system prompt", []Booking{
			{ID: "a", Owner: w1r0, Hashes: p(5, 6)}, {ID: "b", Owner: w1r0, Hashes: p(7)},
		}, map[kvwire.Owner]uint64{w1r0: 7}},
		{"prefix of another", []Booking{
			{ID: "a", Owner: w1r0, Hashes: p(5, 6)}, {ID: "b", Owner: w1r0, Hashes: p()},
		}, map[kvwire.Owner]uint64{w1r0: 6}},
		{"extension of another", []Booking{
			{ID: "a", Owner: w1r0, Hashes: p()}, {ID: "b", Owner: w1r0, Hashes: p(5, 6)},
		}, map[kvwire.Owner]uint64{w1r0: 6}},
		{"other rank pays again", []Booking{
			{ID: "a", Owner: w1r0, Hashes: p(5)}, {ID: "b", Owner: w1r1, Hashes: p(5)},
		}, map[kvwire.Owner]uint64{w1r0: 5, w1r1: 5}},
		{"same block content, different prefix", []Booking{
			{ID: "a", Owner: w1r0, Hashes: chain([]uint64{1, 9})}, {ID: "b", Owner: w1r0, Hashes: chain([]uint64{2, 9})},
		}, map[kvwire.Owner]uint64{w1r0: 4}},
		{"empty prompt", []Booking{{ID: "a", Owner: w1r0}}, map[kvwire.Owner]uint64{w1r0: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestTracker(t, w1r0, w1r1)
			for _, b := range tc.bookings {
				if err := tr.Add(b); err != nil {
					t.Fatal(err)
				}
				mustCheck(t, tr)
			}
			for o, want := range tc.want {
				if got := tr.Load(o).ActiveBlocks; got != want {
					t.Fatalf("%v: ActiveBlocks %d, want %d", o, got, want)
				}
			}
			// Freeing in insertion order drains to zero.
			for _, b := range tc.bookings {
				if err := tr.Free(b.ID); err != nil {
					t.Fatal(err)
				}
				mustCheck(t, tr)
			}
			for _, l := range tr.Loads(nil) {
				if l.ActiveBlocks != 0 || l.ActiveRequests != 0 {
					t.Fatalf("not drained: %+v", l)
				}
			}
		})
	}
}

func TestOutputBlockWithoutFraction(t *testing.T) {
	tr := newTestTracker(t, w1r0)
	if err := tr.Add(Booking{ID: "a", Owner: w1r0, Hashes: chain([]uint64{1, 2})}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := tr.OutputBlock("a", uint64(i), 0, false); err != nil {
			t.Fatal(err)
		}
		wantLoad(t, tr, w1r0, 0, uint64(3+i), 1)
	}
	if err := tr.Free("a"); err != nil {
		t.Fatal(err)
	}
	wantLoad(t, tr, w1r0, 0, 0, 0)
}

func TestLookup(t *testing.T) {
	tr := newTestTracker(t, w1r0, w2r0)
	if err := tr.Add(Booking{ID: "a", Owner: w2r0}); err != nil {
		t.Fatal(err)
	}
	if o, ok := tr.Lookup("a"); !ok || o != w2r0 {
		t.Fatalf("Lookup(a) = %v %v", o, ok)
	}
	if _, ok := tr.Lookup("b"); ok {
		t.Fatal("Lookup(b) found a booking that was never added")
	}
	if err := tr.Free("a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Lookup("a"); ok {
		t.Fatal("Lookup(a) after Free")
	}
	// The id is reusable after Free.
	if err := tr.Add(Booking{ID: "a", Owner: w1r0}); err != nil {
		t.Fatal(err)
	}
	if o, _ := tr.Lookup("a"); o != w1r0 {
		t.Fatalf("reused id on %v", o)
	}
}

func TestGet(t *testing.T) {
	tr := newTestTracker(t, w1r1)
	h := chain([]uint64{4, 5})
	in := Booking{ID: "g", Owner: w1r1, Hashes: h, PrefillTokens: 9, ContextTokens: 5, ExpectedOutputTokens: 33, AdmittedAt: -7}
	if err := tr.Add(in); err != nil {
		t.Fatal(err)
	}
	got, ok := tr.Get("g")
	if !ok || got.ID != in.ID || got.Owner != in.Owner || !slices.Equal(got.Hashes, h) ||
		got.PrefillTokens != 9 || got.ContextTokens != 5 || got.ExpectedOutputTokens != 33 || got.AdmittedAt != -7 {
		t.Fatalf("Get = %+v, %v", got, ok)
	}
	if err := tr.PrefillComplete("g"); err != nil {
		t.Fatal(err)
	}
	if got, _ := tr.Get("g"); got.PrefillTokens != 0 {
		t.Fatalf("outstanding prefill after completion = %d", got.PrefillTokens)
	}
	if _, ok := tr.Get("nope"); ok {
		t.Fatal("Get of an unknown id succeeded")
	}
}

func TestOwners(t *testing.T) {
	tr := NewTracker()
	if tr.HasOwner(w1r0) {
		t.Fatal("new tracker has an owner")
	}
	for _, o := range []kvwire.Owner{w2r0, w1r1, w1r0, w2r0, w1r1} { // duplicates: idempotent
		tr.AddOwner(o)
	}
	if tr.Owners() != 3 {
		t.Fatalf("Owners = %d", tr.Owners())
	}
	got := tr.Loads(nil)
	want := []RankLoad{{Owner: w1r0}, {Owner: w1r1}, {Owner: w2r0}}
	if !slices.Equal(got, want) {
		t.Fatalf("Loads = %+v", got)
	}
	// Loads appends to dst.
	got = tr.Loads(got[:1])
	if len(got) != 4 || got[1].Owner != w1r0 {
		t.Fatalf("Loads(dst) = %+v", got)
	}
	if l := tr.Load(kvwire.Owner{Worker: 9}); l != (RankLoad{Owner: kvwire.Owner{Worker: 9}}) {
		t.Fatalf("unknown owner load %+v", l)
	}
	mustCheck(t, tr)
}

func TestRemoveOwner(t *testing.T) {
	tr := newTestTracker(t, w1r0, w1r1, w2r0)
	shared := chain([]uint64{1, 2, 3})
	for _, b := range []Booking{
		{ID: "c", Owner: w1r0, Hashes: shared, PrefillTokens: 10},
		{ID: "a", Owner: w1r0, Hashes: shared, PrefillTokens: 10},
		{ID: "b", Owner: w1r1, Hashes: shared, PrefillTokens: 5},
		{ID: "d", Owner: w2r0, Hashes: shared[:2]},
	} {
		if err := tr.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	if ids := tr.RemoveOwner(w1r0); !slices.Equal(ids, []string{"a", "c"}) {
		t.Fatalf("RemoveOwner = %v", ids)
	}
	mustCheck(t, tr)
	if tr.HasOwner(w1r0) || tr.Len() != 2 {
		t.Fatalf("owner still known or bookings left: %d", tr.Len())
	}
	for _, id := range []string{"a", "c"} {
		if err := tr.Free(id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Free(%s) after RemoveOwner = %v", id, err)
		}
	}
	if err := tr.Add(Booking{ID: "e", Owner: w1r0}); !errors.Is(err, ErrUnknownOwner) {
		t.Fatalf("Add on removed owner = %v", err)
	}
	// The other owners keep their blocks.
	wantLoad(t, tr, w1r1, 5, 3, 1)
	wantLoad(t, tr, w2r0, 0, 2, 1)
	var m PrefixMatch
	tr.ActivePrefix(shared, &m)
	if want := []PrefixEntry{{w1r1, 3}, {w2r0, 2}}; !slices.Equal(m.Entries(), want) {
		t.Fatalf("ActivePrefix after RemoveOwner = %+v", m.Entries())
	}
	// Removing an unknown owner is a no-op; re-adding starts from zero.
	if ids := tr.RemoveOwner(w1r0); ids != nil {
		t.Fatalf("second RemoveOwner = %v", ids)
	}
	tr.AddOwner(w1r0)
	wantLoad(t, tr, w1r0, 0, 0, 0)
	if err := tr.Add(Booking{ID: "a", Owner: w1r0, Hashes: shared}); err != nil {
		t.Fatal(err)
	}
	wantLoad(t, tr, w1r0, 0, 3, 1)
	if got := tr.Loads(nil); len(got) != 3 || got[0].Owner != w1r0 {
		t.Fatalf("Loads after re-add = %+v", got)
	}
}

func TestExpire(t *testing.T) {
	newT := func() *Tracker {
		tr := newTestTracker(t, w1r0, w2r0)
		for _, b := range []Booking{
			{ID: "t10b", Owner: w1r0, AdmittedAt: 10, Hashes: chain([]uint64{1}), PrefillTokens: 1},
			{ID: "t10a", Owner: w2r0, AdmittedAt: 10, Hashes: chain([]uint64{1})},
			{ID: "t5", Owner: w1r0, AdmittedAt: 5, Hashes: chain([]uint64{1, 2})},
			{ID: "t20", Owner: w1r0, AdmittedAt: 20, Hashes: chain([]uint64{1, 2, 3})},
			{ID: "neg", Owner: w2r0, AdmittedAt: -3},
		} {
			if err := tr.Add(b); err != nil {
				t.Fatal(err)
			}
		}
		return tr
	}
	tests := []struct {
		cutoff int64
		want   []string
		left   int
	}{
		{math.MinInt64, nil, 5},
		{-3, nil, 5},
		{-2, []string{"neg"}, 4},
		{5, []string{"neg"}, 4},
		{6, []string{"neg", "t5"}, 3},
		{10, []string{"neg", "t5"}, 3}, // strictly before the cutoff
		{11, []string{"neg", "t5", "t10a", "t10b"}, 1},
		{math.MaxInt64, []string{"neg", "t5", "t10a", "t10b", "t20"}, 0},
	}
	for _, tc := range tests {
		tr := newT()
		got := tr.Expire(tc.cutoff, []string{"keep"})
		if !slices.Equal(got, append([]string{"keep"}, tc.want...)) || tr.Len() != tc.left {
			t.Fatalf("Expire(%d) = %v (left %d), want %v (left %d)", tc.cutoff, got, tr.Len(), tc.want, tc.left)
		}
		mustCheck(t, tr)
		for _, id := range tc.want {
			if _, ok := tr.Lookup(id); ok {
				t.Fatalf("Expire(%d): %s still live", tc.cutoff, id)
			}
		}
	}
	// After expiring t5 and t10*, w1r0 keeps only t20's 3 blocks.
	tr := newT()
	tr.Expire(11, nil)
	wantLoad(t, tr, w1r0, 0, 3, 1)
	wantLoad(t, tr, w2r0, 0, 0, 0)
}

// TestPrefillQueueAggregates checks the pending-prefill count and sum of squares through
// admission, completion and free, including bookings without prefill.
func TestPrefillQueueAggregates(t *testing.T) {
	tr := newTestTracker(t, w1r0)
	add := func(id string, prefill uint64) {
		t.Helper()
		if err := tr.Add(Booking{ID: id, Owner: w1r0, Hashes: chain([]uint64{uint64(len(id))}), PrefillTokens: prefill}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(pending int, squares uint64) {
		t.Helper()
		if l := tr.Load(w1r0); l.PendingPrefills != pending || l.PrefillSquares != squares {
			t.Fatalf("pending %d squares %d, want %d and %d", l.PendingPrefills, l.PrefillSquares, pending, squares)
		}
	}
	add("a", 10)
	add("bb", 0) // no prefill tracked: not pending
	add("ccc", 3)
	check(2, 109)
	if err := tr.PrefillComplete("a"); err != nil {
		t.Fatal(err)
	}
	check(1, 9)
	if err := tr.PrefillComplete("a"); err != nil { // idempotent
		t.Fatal(err)
	}
	check(1, 9)
	if err := tr.Free("ccc"); err != nil {
		t.Fatal(err)
	}
	check(0, 0)
	add("huge", 1<<40) // capped at 2^31 tokens for the square
	check(1, 1<<62)
}
