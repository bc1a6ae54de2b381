package radix

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// opGen produces random operation sequences over a deliberately tiny universe (few owners, few
// local labels, few external hashes) so that shared prefixes, tier mixes, rebinding, repeated
// hashes and removals in the middle of chains all happen often.
type opGen struct {
	r      *rand.Rand
	owners []kvwire.Owner
	labels uint64 // local hashes are 0..labels-1 (0 is the label free nodes carry)
	exts   uint64 // external hashes are 1..exts (plus derived ones)
}

func newOpGen(seed uint64) *opGen {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &opGen{r: r, labels: 2 + r.Uint64N(4), exts: 8 + r.Uint64N(40)}
	for w := range 1 + r.IntN(3) {
		for k := range 1 + r.IntN(3) {
			g.owners = append(g.owners, kvwire.Owner{Worker: uint64(w*7 + 1), Rank: uint32(k)})
		}
	}
	return g
}

func (g *opGen) owner() kvwire.Owner { return g.owners[g.r.IntN(len(g.owners))] }

func (g *opGen) path(n int) []uint64 {
	p := make([]uint64, n)
	for i := range p {
		p[i] = g.r.Uint64N(g.labels) // 0 included: free nodes carry local 0
	}
	return p
}

// heldExt picks an external hash o holds according to ref, or a random one.
func (g *opGen) heldExt(ref *refIndex, o kvwire.Owner) uint64 {
	if m := ref.lookup[o]; len(m) > 0 && g.r.IntN(5) != 0 {
		k := g.r.IntN(len(m))
		for e := range m {
			if k == 0 {
				return e
			}
			k--
		}
	}
	return 1 + g.r.Uint64N(g.exts)
}

// step applies one random operation to both implementations and fails on any disagreement in
// return values.
func (g *opGen) step(t testing.TB, ix *Index, ref *refIndex) {
	t.Helper()
	o := g.owner()
	tier := kvwire.Tier(g.r.IntN(int(kvwire.NumTiers)))
	if g.r.IntN(50) == 0 {
		tier = kvwire.NumTiers + kvwire.Tier(g.r.IntN(3)) // invalid
	}
	switch op := g.r.IntN(20); {
	case op < 11: // store
		hasParent := g.r.IntN(3) != 0
		var parent uint64
		if hasParent {
			parent = g.heldExt(ref, o)
		}
		blocks := make([]StoredBlock, g.r.IntN(5))
		for i := range blocks {
			blocks[i] = StoredBlock{External: 1 + g.r.Uint64N(g.exts), Local: g.r.Uint64N(g.labels)}
		}
		e1 := ix.Store(o, tier, parent, hasParent, blocks)
		e2 := ref.Store(o, tier, parent, hasParent, blocks)
		if (e1 == nil) != (e2 == nil) || (e2 != nil && !errors.Is(e1, e2)) {
			t.Fatalf("Store(%v,%v,%x,%v,%v): got %v want %v", o, tier, parent, hasParent, blocks, e1, e2)
		}
	case op < 17: // remove
		ext := make([]uint64, 1+g.r.IntN(4))
		for i := range ext {
			ext[i] = g.heldExt(ref, o)
		}
		r1, u1 := ix.Remove(o, tier, ext)
		r2, u2 := ref.Remove(o, tier, ext)
		if r1 != r2 || u1 != u2 {
			t.Fatalf("Remove(%v,%v,%x)=(%d,%d) want (%d,%d)", o, tier, ext, r1, u1, r2, u2)
		}
	case op < 19:
		if a, b := ix.ClearOwner(o), ref.ClearOwner(o); a != b {
			t.Fatalf("ClearOwner(%v)=%d want %d", o, a, b)
		}
	default:
		if a, b := ix.RemoveWorker(o.Worker), ref.RemoveWorker(o.Worker); a != b {
			t.Fatalf("RemoveWorker(%d)=%d want %d", o.Worker, a, b)
		}
	}
}

// probes returns every path over the label alphabet up to depth 3 plus random deeper ones.
func (g *opGen) probes() [][]uint64 {
	var out [][]uint64
	var rec func(p []uint64)
	rec = func(p []uint64) {
		if len(p) > 0 {
			out = append(out, slices.Clone(p))
		}
		if len(p) == 3 {
			return
		}
		for l := range g.labels {
			rec(append(p, l))
		}
	}
	rec(nil)
	for range 20 {
		out = append(out, g.path(4+g.r.IntN(6)))
	}
	return out
}

func (g *opGen) allOwners() []kvwire.Owner {
	return append(slices.Clone(g.owners), kvwire.Owner{Worker: 999, Rank: 9})
}

// TestPropertyAgainstReference runs seeded random operation sequences and compares every
// observable (Match, ExternalPrefix, OwnerEntries, Stats, Dump) with the naive reference after
// each batch of steps.
func TestPropertyAgainstReference(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 60
	}
	for seed := range uint64(seeds) {
		g := newOpGen(seed)
		ix, ref := New(), newRef()
		probes := g.probes()
		for step := range 200 {
			g.step(t, ix, ref)
			if step%10 == 9 {
				compareWithRef(t, ix, ref, probes, g.allOwners())
			}
		}
		compareWithRef(t, ix, ref, probes, g.allOwners())
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
}

// TestDumpRoundTrip replays Dump into a fresh index (each event's Store, then the Remove of its
// bridge) after random histories that include removals in the middle of chains, which leave
// entries the owner cannot reach. The copy must hold what the original holds: equal Match,
// ExternalPrefix and Dump multiset at once, and again after both receive the same further
// random operations — re-storing a removed middle block brings its owner's descendants back
// into view in the original, so a copy that lacked them would answer differently (issue 14).
func TestDumpRoundTrip(t *testing.T) {
	for seed := range uint64(120) {
		g := newOpGen(seed + 10_000)
		ix, ref := New(), newRef()
		for range 150 {
			g.step(t, ix, ref)
		}
		cp := New()
		if err := replayDump(ix, cp); err != nil {
			t.Fatalf("seed %d: replaying the dump: %v", seed, err)
		}
		checkInvariants(t, cp)
		compareIndexes(t, seed, "after replay", g, ix, cp)
		// The same future for both: cp must track ix step by step.
		future := newOpGen(seed + 20_000)
		future.owners, future.labels, future.exts = g.owners, g.labels, g.exts
		for range 100 {
			future.stepPair(t, ix, cp, ref)
		}
		checkInvariants(t, cp)
		compareIndexes(t, seed, "after further operations", g, ix, cp)
	}
}

// stepPair applies one random operation to two indexes, choosing hashes from ref (the original's
// reference), and fails when their results differ.
func (g *opGen) stepPair(t testing.TB, a, b *Index, ref *refIndex) {
	t.Helper()
	o := g.owner()
	tier := kvwire.Tier(g.r.IntN(int(kvwire.NumTiers)))
	switch op := g.r.IntN(20); {
	case op < 12:
		hasParent := g.r.IntN(3) != 0
		var parent uint64
		if hasParent {
			parent = g.heldExt(ref, o)
		}
		blocks := make([]StoredBlock, g.r.IntN(5))
		for i := range blocks {
			blocks[i] = StoredBlock{External: 1 + g.r.Uint64N(g.exts), Local: g.r.Uint64N(g.labels)}
		}
		e1 := a.Store(o, tier, parent, hasParent, blocks)
		e2 := b.Store(o, tier, parent, hasParent, blocks)
		_ = ref.Store(o, tier, parent, hasParent, blocks)
		if (e1 == nil) != (e2 == nil) {
			t.Fatalf("Store(%v,%v,%x,%v,%v): original %v, copy %v", o, tier, parent, hasParent, blocks, e1, e2)
		}
	case op < 19:
		ext := make([]uint64, 1+g.r.IntN(4))
		for i := range ext {
			ext[i] = g.heldExt(ref, o)
		}
		r1, u1 := a.Remove(o, tier, ext)
		r2, u2 := b.Remove(o, tier, ext)
		ref.Remove(o, tier, ext)
		if r1 != r2 || u1 != u2 {
			t.Fatalf("Remove(%v,%v,%x): original (%d,%d), copy (%d,%d)", o, tier, ext, r1, u1, r2, u2)
		}
	default:
		if x, y := a.ClearOwner(o), b.ClearOwner(o); x != y {
			t.Fatalf("ClearOwner(%v): original %d, copy %d", o, x, y)
		}
		ref.ClearOwner(o)
	}
}

// compareIndexes fails when a and b differ in Match, ExternalPrefix or Dump multiset.
func compareIndexes(t *testing.T, seed uint64, when string, g *opGen, a, b *Index) {
	t.Helper()
	if x, y := dumpMultiset(a), dumpMultiset(b); !mapsEqual(x, y) {
		t.Fatalf("seed %d %s: dump multisets differ\n orig %v\n copy %v", seed, when, x, y)
	}
	var m1, m2 Match
	for _, p := range g.probes() {
		a.Match(p, &m1)
		b.Match(p, &m2)
		if !slices.Equal(m1.Owners, m2.Owners) {
			t.Fatalf("seed %d %s: Match(%x) orig %+v copy %+v", seed, when, p, m1.Owners, m2.Owners)
		}
		for _, o := range g.owners {
			x := a.ExternalPrefix(o, p, len(p), nil)
			y := b.ExternalPrefix(o, p, len(p), nil)
			if !slices.Equal(x, y) {
				t.Fatalf("seed %d %s: ExternalPrefix(%v,%x) orig %x copy %x", seed, when, o, p, x, y)
			}
		}
	}
}

// TestDumpStopsEarly checks that visit returning false ends the walk and leaves no scratch marks.
func TestDumpStopsEarly(t *testing.T) {
	ix := New()
	for w := range uint64(3) {
		mustStore(t, ix, kvwire.Owner{Worker: w}, kvwire.TierDevice, 0, false, chain(w*100, 5))
		mustStore(t, ix, kvwire.Owner{Worker: w}, kvwire.TierHostPinned, 0, false, chain(w*100, 5))
	}
	calls := 0
	ix.Dump(func(DumpEvent) bool { calls++; return calls < 3 })
	if calls != 3 {
		t.Fatalf("visit called %d times after returning false, want 3", calls)
	}
	checkInvariants(t, ix) // fails if a mark bit was left behind
	if got := len(dumpMultiset(ix)); got != 30 {
		t.Fatalf("full dump has %d block events, want 30", got)
	}
	ix.Dump(nil) // ignored, must not panic
}

// TestDumpMergesSingleOwnerRuns checks the shape of merged events: a shared head is emitted per
// owner and block, a tail held by one owner with one tier set is one multi-block event.
func TestDumpMergesSingleOwnerRuns(t *testing.T) {
	ix := New()
	mustStore(t, ix, a0, kvwire.TierDevice, 0, false, chain(10, 6))
	mustStore(t, ix, b0, kvwire.TierDevice, 0, false, chain(30, 2))
	mustStore(t, ix, a0, kvwire.TierHostPinned, 10, true, chainFrom(11, 1, 1))
	type ev struct {
		o      kvwire.Owner
		tier   kvwire.Tier
		parent uint64
		has    bool
		ext    []uint64
	}
	var got []ev
	ix.Dump(func(e DumpEvent) bool {
		x := ev{o: e.Owner, tier: e.Tier, parent: e.Parent, has: e.HasParent}
		for _, b := range e.Blocks {
			x.ext = append(x.ext, b.External)
		}
		got = append(got, x)
		return true
	})
	// Depth 1: a0 and b0 (one event each); depth 2: a0 device, a0 host, b0; then a0's tail
	// (blocks 12..15, device only) as one run.
	want := map[string]bool{
		"{{1 0} device 0 false [10]}":          true,
		"{{2 0} device 0 false [30]}":          true,
		"{{1 0} device 10 true [11]}":          true,
		"{{1 0} host_pinned 10 true [11]}":     true,
		"{{2 0} device 30 true [31]}":          true,
		"{{1 0} device 11 true [12 13 14 15]}": true,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(got), got, len(want))
	}
	for _, e := range got {
		if k := fmt.Sprintf("{%v %s %d %v %v}", e.o, e.tier, e.parent, e.has, e.ext); !want[k] {
			t.Fatalf("unexpected event %s (all: %+v)", k, got)
		}
	}
	checkInvariants(t, ix)
}
