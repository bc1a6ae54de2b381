package radix

import (
	"slices"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// slotTable maps every rank of ix to a slot: owners in want get their position in want, the
// others -1 (the caller's view: its own owner list, a subset of the index's or a superset).
func slotTable(ix *Index, want []kvwire.Owner) []int32 {
	slot := make([]int32, ix.Owners())
	for r := range slot {
		o, ok := ix.OwnerAt(r)
		slot[r] = -1
		if i := slices.Index(want, o); ok && i >= 0 {
			slot[r] = int32(i)
		}
	}
	return slot
}

// checkSlots compares MatchSlots with Match on every probe, for a caller owner list that keeps
// some of the index's owners (shuffled), drops others and adds unknown ones, and for a slot
// table that is too short (a stale caller).
func checkSlots(t testing.TB, ix *Index, probes [][]uint64, callers []kvwire.Owner) {
	t.Helper()
	// Ranks enumerate the owners in (Worker, Rank) order.
	var ranked []kvwire.Owner
	for r := range ix.Owners() {
		o, ok := ix.OwnerAt(r)
		if !ok {
			t.Fatalf("OwnerAt(%d) out of range with %d owners", r, ix.Owners())
		}
		ranked = append(ranked, o)
	}
	if !slices.IsSortedFunc(ranked, kvwire.Owner.Compare) || ix.Owners() != ix.Stats().Owners {
		t.Fatalf("ranked owners %v not sorted or count %d != Stats %d", ranked, ix.Owners(), ix.Stats().Owners)
	}
	if _, ok := ix.OwnerAt(ix.Owners()); ok {
		t.Fatalf("OwnerAt(Owners()) reported an owner")
	}
	if _, ok := ix.OwnerAt(-1); ok {
		t.Fatalf("OwnerAt(-1) reported an owner")
	}
	slot := slotTable(ix, callers)
	// m serves only Match (the reference); ms only MatchSlots, carrying its scratch from probe to
	// probe; mix alternates MatchSlots on the previous probe with Match on this one, so scratch
	// left dirty by MatchSlots would show up in the next answer of either.
	var m, ms, mix Match
	dst := make([]Counts, len(callers))
	spare := make([]Counts, len(callers))
	for k, q := range probes {
		ix.Match(q, &m)
		want := make([]Counts, len(callers))
		for _, om := range m.Owners {
			if i := slices.Index(callers, om.Owner); i >= 0 {
				want[i] = Counts{om.Device, om.HostExt, om.DiskExt, om.ExternalExt}
			}
		}
		clear(dst)
		ix.MatchSlots(q, &ms, slot, dst)
		if !slices.Equal(dst, want) {
			t.Fatalf("MatchSlots(%v) = %v, Match says %v (callers %v)", q, dst, want, callers)
		}
		if len(ms.Owners) != 0 {
			t.Fatalf("MatchSlots left %d OwnerMatch records", len(ms.Owners))
		}
		// A stale, short table skips the ranks it lacks and panics on nothing; so does nil.
		ix.MatchSlots(q, &ms, slot[:len(slot)/2], spare)
		ix.MatchSlots(q, nil, slot, spare)
		if k > 0 {
			ix.MatchSlots(probes[k-1], &mix, slot, spare)
		}
		ix.Match(q, &mix)
		if !slices.Equal(mix.Owners, m.Owners) {
			t.Fatalf("Match(%v) after MatchSlots = %v, want %v", q, mix.Owners, m.Owners)
		}
	}
}

// TestMatchSlotsAgainstMatch runs the random operation generator and, every few steps, checks
// MatchSlots against Match and that Version moves exactly when the owner set changes.
func TestMatchSlotsAgainstMatch(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	moves := 0
	for seed := range uint64(seeds) {
		g := newOpGen(seed)
		ix, ref := New(), newRef()
		probes := g.probes()
		// Callers: the generator's owners shuffled, minus one, plus an owner the index never sees.
		callers := slices.Clone(g.owners)
		g.r.Shuffle(len(callers), func(i, j int) { callers[i], callers[j] = callers[j], callers[i] })
		callers = append(callers[1:], kvwire.Owner{Worker: 999, Rank: 9})
		for step := range 200 {
			before, owners := ix.Version(), ownerSet(ix)
			g.step(t, ix, ref)
			changed := !slices.Equal(owners, ownerSet(ix))
			if moved := ix.Version() != before; moved != changed {
				t.Fatalf("seed %d step %d: Version moved=%v, owner set changed=%v", seed, step, moved, changed)
			} else if moved {
				moves++
			}
			if step%10 == 9 {
				checkSlots(t, ix, probes, callers)
			}
		}
	}
	if moves == 0 {
		t.Fatal("no owner-set change happened: weak workload")
	}
}

func ownerSet(ix *Index) []kvwire.Owner {
	var out []kvwire.Owner
	for r := range ix.Owners() {
		o, _ := ix.OwnerAt(r)
		out = append(out, o)
	}
	return out
}

// TestMatchSlotsWorkload checks MatchSlots against Match on the production-shaped workload
// (hundreds of owners sharing system prompts: the implicit first-node path and wide emits).
func TestMatchSlotsWorkload(t *testing.T) {
	c := defaultWL
	c.workers, c.ranks, c.conversations, c.queryLen = 16, 8, 800, 48
	w := genWorkload(c)
	ix := w.build(t)
	callers := slices.Clone(w.owners[3:])
	callers = append(callers, kvwire.Owner{Worker: 1, Rank: 1})
	checkSlots(t, ix, w.queries[:60], callers)
	if n := ix.Owners(); n < 100 {
		t.Fatalf("workload has only %d owners", n)
	}
}

// BenchmarkMatchSlots is BenchmarkMatch answered through MatchSlots into a per-owner array (the
// engine fast path's use), including the clear of that array.
func BenchmarkMatchSlots(b *testing.B) {
	w, ix := benchSetup(b)
	slot := slotTable(ix, w.owners)
	dst := make([]Counts, len(w.owners))
	var m Match
	for _, q := range w.queries {
		ix.MatchSlots(q, &m, slot, dst) // warm the same-as-parent flags
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		clear(dst)
		ix.MatchSlots(w.queries[i%len(w.queries)], &m, slot, dst)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}
