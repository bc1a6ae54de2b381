package engine

// Benchmarks of the selection fast path's stages (fast.go) on the fleet of bench_test.go, to
// attribute its cost: the index match merged into per-rank overlap, the booked prefix by ordinal,
// the cost loop over every rank (loads read in place), the reservoir pick, and the whole
// chooseFast. Compare with BenchmarkSelectSteps (the general path's stages).

import "testing"

func BenchmarkFastSteps(b *testing.B) {
	f := getFleet(b)
	e := f.e
	p := e.parts[defKey]
	w := e.weightsFor(nil)
	norms := make([]normalized, len(f.prompts))
	for i, pr := range f.prompts {
		prompt := tokenPrompt(pr)
		norms[i], _ = e.normalize(p, &prompt, true, true)
	}
	sel := func(i int) *selection {
		return &selection{p: p, norm: norms[i%len(norms)], w: w}
	}
	b.Run("choose_fast", func(b *testing.B) {
		b.ReportAllocs()
		s := sel(0)
		for i := 0; i < b.N; i++ {
			s.norm = norms[i%len(norms)]
			if err := e.chooseFast(s, false, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The stages below rerun chooseFast's pieces on the state it left behind.
	b.Run("prefix_ordinals", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			e.scratch.fast.booked = p.tracker.ActivePrefixOrdinals(norms[i%len(norms)].seq, e.scratch.fast.booked)
		}
	})
	b.Run("cost_loop", func(b *testing.B) {
		b.ReportAllocs()
		fs := &e.scratch.fast
		for i := 0; i < b.N; i++ {
			k := newDynamoTerms(&norms[i%len(norms)], p.blockSize, w)
			for j := range fs.cost {
				prefill, blocks, requests, _, _ := p.tracker.CountersAt(j)
				o := &fs.ov[j]
				fs.cost[j] = k.simpleCost(o[0], int(fs.booked[j]), prefill, blocks, requests)
			}
		}
	})
	b.Run("pick", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			e.pickCosts(e.scratch.fast.cost)
		}
	})
}
