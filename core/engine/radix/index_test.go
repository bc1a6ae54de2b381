package radix

import (
	"errors"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// chain returns n blocks with externals extBase, extBase+1, ... and locals 101, 102, ...: owners
// storing chains with the same n share the path but not the external hashes (unless extBase is
// the same).
func chain(extBase uint64, n int) []StoredBlock {
	b := make([]StoredBlock, n)
	for i := range b {
		b[i] = StoredBlock{External: extBase + uint64(i), Local: 101 + uint64(i)}
	}
	return b
}

// chainFrom is chain starting at depth (locals 101+depth, ...), for continuing under a parent.
func chainFrom(extBase uint64, depth, n int) []StoredBlock {
	b := chain(extBase, n)
	for i := range b {
		b[i].Local += uint64(depth)
	}
	return b
}

// locals returns the local path 101..100+n matching chain.
func locals(n int) []uint64 {
	p := make([]uint64, n)
	for i := range p {
		p[i] = 101 + uint64(i)
	}
	return p
}

func mustStore(t testing.TB, ix *Index, o kvwire.Owner, tier kvwire.Tier, parent uint64, hasParent bool, b []StoredBlock) {
	t.Helper()
	if err := ix.Store(o, tier, parent, hasParent, b); err != nil {
		t.Fatalf("Store: %v", err)
	}
}

func om(w uint64, r uint32, d, h, k, e int32) OwnerMatch {
	return OwnerMatch{Owner: kvwire.Owner{Worker: w, Rank: r}, Device: d, HostExt: h, DiskExt: k, ExternalExt: e}
}

var (
	a0 = kvwire.Owner{Worker: 1, Rank: 0}
	a1 = kvwire.Owner{Worker: 1, Rank: 1}
	b0 = kvwire.Owner{Worker: 2, Rank: 0}
)

func TestOperations(t *testing.T) {
	type op func(t *testing.T, ix *Index)
	store := func(o kvwire.Owner, tier kvwire.Tier, parent uint64, has bool, b []StoredBlock) op {
		return func(t *testing.T, ix *Index) { mustStore(t, ix, o, tier, parent, has, b) }
	}
	remove := func(o kvwire.Owner, tier kvwire.Tier, wantRemoved, wantUnknown int, ext ...uint64) op {
		return func(t *testing.T, ix *Index) {
			r, u := ix.Remove(o, tier, ext)
			if r != wantRemoved || u != wantUnknown {
				t.Fatalf("Remove=(%d,%d) want (%d,%d)", r, u, wantRemoved, wantUnknown)
			}
		}
	}
	cases := []struct {
		name     string
		ops      []op
		probe    []uint64
		want     []OwnerMatch
		stats    Stats // Bytes ignored
		prefixOf kvwire.Owner
		prefix   []uint64
	}{
		{
			name:  "empty index matches nothing",
			probe: locals(3),
		},
		{
			name:     "single chain full and partial match",
			ops:      []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 4))},
			probe:    append(locals(3), 999),
			want:     []OwnerMatch{om(1, 0, 3, 0, 0, 0)},
			stats:    Stats{Nodes: 4, Entries: 4, Owners: 1},
			prefixOf: a0, prefix: []uint64{10, 11, 12},
		},
		{
			name: "chain continued under a parent",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 2)),
				store(a0, kvwire.TierDevice, 11, true, []StoredBlock{{External: 12, Local: 103}})},
			probe: locals(3),
			want:  []OwnerMatch{om(1, 0, 3, 0, 0, 0)},
			stats: Stats{Nodes: 3, Entries: 3, Owners: 1}, prefixOf: a0, prefix: []uint64{10, 11, 12},
		},
		{
			name: "shared prefix, owners sorted by (worker, rank)",
			ops: []op{store(b0, kvwire.TierDevice, 0, false, chain(30, 5)),
				store(a1, kvwire.TierDevice, 0, false, chain(20, 2)),
				store(a0, kvwire.TierDevice, 0, false, chain(10, 3))},
			probe: locals(5),
			want:  []OwnerMatch{om(1, 0, 3, 0, 0, 0), om(1, 1, 2, 0, 0, 0), om(2, 0, 5, 0, 0, 0)},
			stats: Stats{Nodes: 5, Entries: 10, Owners: 3}, prefixOf: a1, prefix: []uint64{20, 21},
		},
		{
			name: "re-store is idempotent",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 3)),
				store(a0, kvwire.TierDevice, 0, false, chain(10, 3)),
				store(a0, kvwire.TierDevice, 10, true, chainFrom(11, 1, 2))},
			probe: locals(3),
			want:  []OwnerMatch{om(1, 0, 3, 0, 0, 0)},
			stats: Stats{Nodes: 3, Entries: 3, Owners: 1},
		},
		{
			name: "device then host continuation",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 4)),
				store(a0, kvwire.TierHostPinned, 0, false, chain(10, 6))},
			probe: locals(6),
			want:  []OwnerMatch{om(1, 0, 4, 2, 0, 0)},
			stats: Stats{Nodes: 6, Entries: 6, Owners: 1},
		},
		{
			name:  "lower tier entered from the root",
			ops:   []op{store(a0, kvwire.TierDisk, 0, false, chain(10, 3))},
			probe: locals(3),
			want:  []OwnerMatch{om(1, 0, 0, 0, 3, 0)},
			stats: Stats{Nodes: 3, Entries: 3, Owners: 1},
		},
		{
			name: "host skipped: device then disk then external",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 2)),
				store(a0, kvwire.TierDisk, 11, true, chainFrom(12, 2, 2)),
				store(a0, kvwire.TierExternal, 13, true, chainFrom(14, 4, 1))},
			probe: locals(6),
			want:  []OwnerMatch{om(1, 0, 2, 0, 2, 1)},
			stats: Stats{Nodes: 5, Entries: 5, Owners: 1},
		},
		{
			name: "no return to a higher tier",
			ops: []op{store(a0, kvwire.TierHostPinned, 0, false, chain(10, 1)),
				store(a0, kvwire.TierDevice, 10, true, chainFrom(11, 1, 2))},
			probe: locals(3),
			want:  []OwnerMatch{om(1, 0, 0, 1, 0, 0)},
			stats: Stats{Nodes: 3, Entries: 3, Owners: 1},
		},
		{
			name:  "unknown parent changes nothing",
			ops:   []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 2)), expectErr(a0, 77, ErrParentNotFound)},
			probe: locals(3),
			want:  []OwnerMatch{om(1, 0, 2, 0, 0, 0)},
			stats: Stats{Nodes: 2, Entries: 2, Owners: 1},
		},
		{
			name:  "unknown owner with parent changes nothing",
			ops:   []op{expectErr(b0, 10, ErrParentNotFound)},
			probe: locals(1),
		},
		{
			name: "remove middle of chain cuts the match but keeps the node",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 5)),
				remove(a0, kvwire.TierDevice, 1, 0, 12)},
			probe: locals(5),
			want:  []OwnerMatch{om(1, 0, 2, 0, 0, 0)},
			stats: Stats{Nodes: 5, Entries: 4, Owners: 1}, prefixOf: a0, prefix: []uint64{10, 11},
		},
		{
			name: "removing the tail prunes empty leaves up the chain",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 5)),
				remove(a0, kvwire.TierDevice, 1, 0, 12), remove(a0, kvwire.TierDevice, 2, 1, 14, 13, 99)},
			probe: locals(5),
			want:  []OwnerMatch{om(1, 0, 2, 0, 0, 0)},
			stats: Stats{Nodes: 2, Entries: 2, Owners: 1},
		},
		{
			name: "remove one tier keeps the other",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 3)),
				store(a0, kvwire.TierHostPinned, 0, false, chain(10, 3)),
				remove(a0, kvwire.TierDevice, 1, 0, 11), remove(a0, kvwire.TierDisk, 0, 1, 10)},
			probe: locals(3),
			want:  []OwnerMatch{om(1, 0, 1, 2, 0, 0)},
			stats: Stats{Nodes: 3, Entries: 3, Owners: 1},
		},
		{
			name: "clear owner leaves other ranks",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 3)),
				store(a1, kvwire.TierDisk, 0, false, chain(20, 2)),
				func(t *testing.T, ix *Index) {
					if n := ix.ClearOwner(a0); n != 3 {
						t.Fatalf("ClearOwner=%d want 3", n)
					}
					if n := ix.ClearOwner(a0); n != 0 {
						t.Fatalf("second ClearOwner=%d want 0", n)
					}
				}},
			probe: locals(3),
			want:  []OwnerMatch{om(1, 1, 0, 0, 2, 0)},
			stats: Stats{Nodes: 2, Entries: 2, Owners: 1},
		},
		{
			name: "remove worker drops every rank",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 3)),
				store(a1, kvwire.TierDevice, 0, false, chain(20, 4)),
				store(b0, kvwire.TierDevice, 0, false, chain(30, 1)),
				func(t *testing.T, ix *Index) {
					if n := ix.RemoveWorker(1); n != 7 {
						t.Fatalf("RemoveWorker=%d want 7", n)
					}
				}},
			probe: locals(3),
			want:  []OwnerMatch{om(2, 0, 1, 0, 0, 0)},
			stats: Stats{Nodes: 1, Entries: 1, Owners: 1},
		},
		{
			name: "external hash rebound to another path moves the entry",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 2)),
				store(a0, kvwire.TierDevice, 0, false, []StoredBlock{{External: 11, Local: 500}})},
			probe: locals(2),
			want:  []OwnerMatch{om(1, 0, 1, 0, 0, 0)},
			stats: Stats{Nodes: 2, Entries: 2, Owners: 1}, prefixOf: a0, prefix: []uint64{10},
		},
		{
			name: "new external hash for a held node replaces the old one",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 2)),
				store(a0, kvwire.TierHostPinned, 0, false, chain(50, 1)),
				remove(a0, kvwire.TierDevice, 0, 1, 10), remove(a0, kvwire.TierDevice, 1, 0, 50)},
			probe: locals(2),
			want:  []OwnerMatch{om(1, 0, 0, 1, 0, 0)},
			stats: Stats{Nodes: 2, Entries: 2, Owners: 1}, prefixOf: a0, prefix: []uint64{50, 11},
		},
		{
			name: "duplicate hash and invalid tier are rejected",
			ops: []op{store(a0, kvwire.TierDevice, 0, false, chain(10, 1)),
				func(t *testing.T, ix *Index) {
					b := append(chain(20, 30), StoredBlock{External: 25, Local: 1})
					for _, err := range []error{
						ix.Store(a0, kvwire.TierDevice, 0, false, []StoredBlock{{1, 1}, {1, 2}}),
						ix.Store(a0, kvwire.TierDevice, 10, true, []StoredBlock{{10, 1}}),
						ix.Store(a0, kvwire.TierDevice, 0, false, b),
					} {
						if !errors.Is(err, ErrDuplicateHash) {
							t.Fatalf("err=%v want ErrDuplicateHash", err)
						}
					}
					if err := ix.Store(a0, kvwire.NumTiers, 0, false, chain(1, 1)); !errors.Is(err, ErrInvalidTier) {
						t.Fatalf("err=%v want ErrInvalidTier", err)
					}
					if r, u := ix.Remove(a0, kvwire.NumTiers, []uint64{10}); r != 0 || u != 1 {
						t.Fatalf("Remove invalid tier=(%d,%d)", r, u)
					}
				}},
			probe: locals(1),
			want:  []OwnerMatch{om(1, 0, 1, 0, 0, 0)},
			stats: Stats{Nodes: 1, Entries: 1, Owners: 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ix := New()
			for _, f := range tc.ops {
				f(t, ix)
			}
			checkInvariants(t, ix)
			var m Match
			ix.Match(tc.probe, &m)
			if !slices.Equal(m.Owners, tc.want) {
				t.Fatalf("Match:\n got %+v\nwant %+v", m.Owners, tc.want)
			}
			st := ix.Stats()
			st.Bytes = 0
			if st != tc.stats {
				t.Fatalf("Stats=%+v want %+v", st, tc.stats)
			}
			if tc.prefix != nil {
				got := ix.ExternalPrefix(tc.prefixOf, tc.probe, len(tc.probe), nil)
				if !slices.Equal(got, tc.prefix) {
					t.Fatalf("ExternalPrefix=%v want %v", got, tc.prefix)
				}
			}
		})
	}
}

// expectErr stores one block under parent and expects err, with the index unchanged.
func expectErr(o kvwire.Owner, parent uint64, want error) func(t *testing.T, ix *Index) {
	return func(t *testing.T, ix *Index) {
		before, beforeDump := ix.Stats(), dumpMultiset(ix)
		err := ix.Store(o, kvwire.TierDevice, parent, true, chain(1000, 2))
		if !errors.Is(err, want) {
			t.Fatalf("err=%v want %v", err, want)
		}
		if after := ix.Stats(); after != before || !mapsEqual(beforeDump, dumpMultiset(ix)) {
			t.Fatalf("failed store changed the index: %+v → %+v", before, after)
		}
	}
}

func TestExternalPrefixLimits(t *testing.T) {
	ix := New()
	mustStore(t, ix, a0, kvwire.TierDevice, 0, false, chain(10, 4))
	cases := []struct {
		o    kvwire.Owner
		path []uint64
		n    int
		want []uint64
	}{
		{a0, locals(4), 2, []uint64{10, 11}},
		{a0, locals(4), 10, []uint64{10, 11, 12, 13}},
		{a0, locals(2), 10, []uint64{10, 11}},
		{a0, locals(4), 0, nil},
		{a0, []uint64{999}, 4, nil},
		{b0, locals(4), 4, nil},
		{a0, locals(4), -1, nil},
	}
	for _, c := range cases {
		got := ix.ExternalPrefix(c.o, c.path, c.n, []uint64{7})
		if !slices.Equal(got, append([]uint64{7}, c.want...)) {
			t.Errorf("ExternalPrefix(%v,%v,%d)=%v want 7 then %v", c.o, c.path, c.n, got, c.want)
		}
	}
}

// TestMemoryReuse checks that removed nodes and entry chunks are reused (the arenas do not grow
// when the same volume is stored again) and that a drained index releases its arenas.
func TestMemoryReuse(t *testing.T) {
	ix := New()
	fill := func(base uint64) {
		for o := range 20 {
			for c := range 10 {
				b := chain(base+uint64(o*1000+c*50), 8)
				for i := range b {
					b[i].Local = uint64(c*100 + i)
				}
				mustStore(t, ix, kvwire.Owner{Worker: uint64(o)}, kvwire.TierDevice, 0, false, b)
			}
		}
	}
	fill(0)
	st := ix.Stats()
	nodesLen, slabLen := len(ix.nodes), len(ix.ents.keys)
	// Drain half the owners, then store them again with new external hashes.
	for o := range 10 {
		ix.ClearOwner(kvwire.Owner{Worker: uint64(o)})
	}
	checkInvariants(t, ix)
	fill(1 << 40)
	for o := 10; o < 20; o++ {
		ix.ClearOwner(kvwire.Owner{Worker: uint64(o)})
		for c := range 10 {
			b := chain(1<<40+uint64(o*1000+c*50), 8)
			for i := range b {
				b[i].Local = uint64(c*100 + i)
			}
			mustStore(t, ix, kvwire.Owner{Worker: uint64(o)}, kvwire.TierDevice, 0, false, b)
		}
	}
	checkInvariants(t, ix)
	if got := ix.Stats(); got.Nodes != st.Nodes || got.Entries != st.Entries {
		t.Fatalf("refilled stats %+v, first fill %+v", got, st)
	}
	if len(ix.nodes) != nodesLen || len(ix.ents.keys) > slabLen {
		t.Fatalf("arenas grew on refill: nodes %d→%d slab %d→%d", nodesLen, len(ix.nodes), slabLen, len(ix.ents.keys))
	}
	for o := range 20 {
		ix.RemoveWorker(uint64(o))
	}
	checkInvariants(t, ix)
	if got := ix.Stats(); got.Nodes != 0 || got.Entries != 0 || got.Owners != 0 {
		t.Fatalf("drained stats %+v", got)
	}
	if len(ix.nodes) != 1 || cap(ix.ents.keys) != 0 || len(ix.lookup.slots) != 0 || len(ix.children.slots) != 0 {
		t.Fatalf("drained index kept memory: nodes %d slab %d lookup %d children %d",
			len(ix.nodes), cap(ix.ents.keys), len(ix.lookup.slots), len(ix.children.slots))
	}
	fill(7)
	checkInvariants(t, ix)
	if got := ix.Stats(); got.Nodes != st.Nodes || got.Entries != st.Entries {
		t.Fatalf("after drain and refill %+v want %+v", got, st)
	}
}

// TestMatchManyOwners exercises both output orderings (sort and rank scatter) and the owner-list
// flag that skips identical nodes, with owners interned in a scrambled order.
func TestMatchManyOwners(t *testing.T) {
	for _, n := range []int{5, 40, 300} {
		ix, ref := New(), newRef()
		for k := range n {
			w := uint64((k * 7919) % n)
			o := kvwire.Owner{Worker: w / 4, Rank: uint32(w % 4)}
			depth := 3 + k%5
			b := chain(uint64(k)<<20, depth)
			mustStore(t, ix, o, kvwire.TierDevice, 0, false, b)
			_ = ref.Store(o, kvwire.TierDevice, 0, false, b)
			if k%3 == 0 {
				hb := chain(uint64(k)<<20, depth+2)
				mustStore(t, ix, o, kvwire.TierHostPinned, 0, false, hb)
				_ = ref.Store(o, kvwire.TierHostPinned, 0, false, hb)
			}
		}
		compareWithRef(t, ix, ref, [][]uint64{locals(10), locals(3), locals(1)}, nil)
		var m Match
		ix.Match(locals(10), &m)
		if len(m.Owners) != n {
			t.Fatalf("n=%d: %d owners matched", n, len(m.Owners))
		}
		// Remove a tier in the middle of the shared prefix for some owners: the cached
		// same-as-parent flags must be invalidated.
		for k := 0; k < n; k += 2 {
			w := uint64((k * 7919) % n)
			o := kvwire.Owner{Worker: w / 4, Rank: uint32(w % 4)}
			ix.Remove(o, kvwire.TierDevice, []uint64{uint64(k)<<20 + 1})
			ref.Remove(o, kvwire.TierDevice, []uint64{uint64(k)<<20 + 1})
		}
		compareWithRef(t, ix, ref, [][]uint64{locals(10), locals(3), locals(1)}, nil)
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	ix := New()
	for k := range 64 {
		mustStore(t, ix, kvwire.Owner{Worker: uint64(k)}, kvwire.TierDevice, 0, false, chain(uint64(k)<<20, 6+k%10))
	}
	var m Match
	p := locals(16)
	ix.Match(p, &m)
	if a := testing.AllocsPerRun(100, func() { ix.Match(p, &m) }); a != 0 {
		t.Fatalf("Match allocates %.1f times per call", a)
	}
}

func TestTableGrowShrink(t *testing.T) {
	var tb table
	tb.seed = 42
	const n = 5000
	for i := range uint64(n) {
		tb.put(uint32(i%7), i*0x9e3779b97f4a7c15, uint32(i+1))
	}
	if tb.used != n {
		t.Fatalf("used %d", tb.used)
	}
	for i := range uint64(n) {
		if v := tb.get(uint32(i%7), i*0x9e3779b97f4a7c15); v != uint32(i+1) {
			t.Fatalf("get %d = %d", i, v)
		}
	}
	big := len(tb.slots)
	for i := range uint64(n) {
		if i%10 != 0 && !tb.del(uint32(i%7), i*0x9e3779b97f4a7c15) {
			t.Fatalf("del %d failed", i)
		}
	}
	if len(tb.slots) > big/4 {
		t.Fatalf("table did not shrink: %d → %d slots", big, len(tb.slots))
	}
	for i := range uint64(n) {
		want := uint32(0)
		if i%10 == 0 {
			want = uint32(i + 1)
		}
		if v := tb.get(uint32(i%7), i*0x9e3779b97f4a7c15); v != want {
			t.Fatalf("after deletes get %d = %d want %d", i, v, want)
		}
	}
	if tb.del(99, 1) {
		t.Fatal("deleted a missing key")
	}
}
