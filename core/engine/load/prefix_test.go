package load

import (
	"slices"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

func TestActivePrefix(t *testing.T) {
	tr := newTestTracker(t, w1r0, w1r1, w2r0)
	// w1r0: [1 2 3 4 5] and [1 2 6]; w1r1: [1 2 3]; w2r0: [1 2 3 4 5 7 8].
	for _, b := range []Booking{
		{ID: "a", Owner: w1r0, Hashes: chain([]uint64{1, 2, 3, 4, 5})},
		{ID: "b", Owner: w1r0, Hashes: chain([]uint64{1, 2, 6})},
		{ID: "c", Owner: w1r1, Hashes: chain([]uint64{1, 2, 3})},
		{ID: "d", Owner: w2r0, Hashes: chain([]uint64{1, 2, 3, 4, 5, 7, 8})},
	} {
		if err := tr.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		query []uint64
		want  []PrefixEntry
	}{
		{"empty query", nil, nil},
		{"unknown first block", chain([]uint64{9, 1, 2}), nil},
		{"one block", chain([]uint64{1}), []PrefixEntry{{w1r0, 1}, {w1r1, 1}, {w2r0, 1}}},
		{"owners drop at node boundaries", chain([]uint64{1, 2, 3, 4, 5, 7, 8, 9}),
			[]PrefixEntry{{w1r0, 5}, {w1r1, 3}, {w2r0, 7}}},
		{"divergence inside an edge", chain([]uint64{1, 2, 3, 4, 5, 7, 9}),
			[]PrefixEntry{{w1r0, 5}, {w1r1, 3}, {w2r0, 6}}},
		{"query shorter than live paths", chain([]uint64{1, 2, 3, 4}),
			[]PrefixEntry{{w1r0, 4}, {w1r1, 3}, {w2r0, 4}}},
		{"other branch", chain([]uint64{1, 2, 6, 6}), []PrefixEntry{{w1r0, 3}, {w1r1, 2}, {w2r0, 2}}},
		{"same contents under another prefix do not match", chain([]uint64{2, 3, 4}), nil},
	}
	var m PrefixMatch
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr.ActivePrefix(tc.query, &m)
			if !slices.Equal(m.Entries(), tc.want) && (m.Len() != 0 || len(tc.want) != 0) {
				t.Fatalf("ActivePrefix = %+v, want %+v", m.Entries(), tc.want)
			}
			for i, e := range tc.want {
				if m.At(i) != e || m.Blocks(e.Owner) != e.Blocks {
					t.Fatalf("At(%d) = %+v, Blocks = %d, want %+v", i, m.At(i), m.Blocks(e.Owner), e)
				}
			}
			if m.Blocks(kvwire.Owner{Worker: 99}) != 0 {
				t.Fatal("Blocks of an absent owner is not 0")
			}
		})
	}
	tr.ActivePrefix(chain([]uint64{1}), nil) // nil match: ignored, no panic
}

// TestActivePrefixManyOwners exercises the counting-pass ordering used for
// large results: owners are added in scrambled order and must come back
// sorted, each with its own prefix length.
func TestActivePrefixManyOwners(t *testing.T) {
	tr := NewTracker()
	full := chain([]uint64{1, 2, 3, 4, 5, 6, 7, 8})
	var want []PrefixEntry
	for i := range 96 {
		k := (i * 37) % 96 // a permutation of 0..95: scrambled insertion order
		o := kvwire.Owner{Worker: uint64(k / 2), Rank: uint32(k % 2)}
		tr.AddOwner(o)
		n := 1 + (i % len(full))
		if err := tr.Add(Booking{ID: string(rune('A' + i)), Owner: o, Hashes: full[:n]}); err != nil {
			t.Fatal(err)
		}
		want = append(want, PrefixEntry{o, n})
	}
	slices.SortFunc(want, func(a, b PrefixEntry) int { return a.Owner.Compare(b.Owner) })
	mustCheck(t, tr)
	var m PrefixMatch
	tr.ActivePrefix(full, &m)
	if !slices.Equal(m.Entries(), want) {
		t.Fatalf("ActivePrefix = %+v\nwant %+v", m.Entries(), want)
	}
}

// TestActivePrefixNoAllocs: once the PrefixMatch buffers have grown, a query
// allocates nothing, for both small and large results.
func TestActivePrefixNoAllocs(t *testing.T) {
	tr := NewTracker()
	full := chain([]uint64{1, 2, 3, 4, 5, 6, 7, 8})
	for i := range 64 {
		o := kvwire.Owner{Worker: uint64(i)}
		tr.AddOwner(o)
		if err := tr.Add(Booking{ID: string(rune('A' + i)), Owner: o, Hashes: full[:1+i%8]}); err != nil {
			t.Fatal(err)
		}
	}
	var m PrefixMatch
	for _, q := range [][]uint64{full, chain([]uint64{1, 9})} {
		tr.ActivePrefix(q, &m)
		if a := testing.AllocsPerRun(100, func() { tr.ActivePrefix(q, &m) }); a != 0 {
			t.Fatalf("ActivePrefix allocates %v per call", a)
		}
	}
}
