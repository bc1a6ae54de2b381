package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestIncrementalCandsMatchRebuild: after every random upsert, re-registration, lifecycle
// change and delete, the incrementally spliced candidate list, owners, ordinal flag and rank
// names equal what a full rebuild computes.
func TestIncrementalCandsMatchRebuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	e := newEngine(t, approxConfig())
	for step := range 3000 {
		id := uint64(rng.IntN(60) + 1)
		switch op := rng.IntN(10); {
		case op < 6:
			s := spec(id, dp(uint32(rng.IntN(8)), uint32(rng.IntN(3)+1)))
			if rng.IntN(8) == 0 {
				s.BlockSize = nil // incomplete: not schedulable
			}
			if _, err := e.UpsertWorker(s); err != nil {
				t.Fatal(err)
			}
		case op < 8:
			_, _ = e.DeleteWorker(id)
		default:
			_, _ = e.PatchWorker(id, WorkerPatch{DataParallelSize: ptr(uint32(rng.IntN(4) + 1))})
		}
		p := e.parts[defKey]
		if p == nil {
			continue
		}
		gotC, gotO, gotOK := slices.Clone(p.cands), slices.Clone(p.owners), p.ordOK
		gotNames := map[uint32]string{}
		for _, c := range gotC {
			gotNames[c.rank] = p.rankName(c.rank)
		}
		p.rebuild()
		if !slices.Equal(gotC, p.cands) || !slices.Equal(gotO, p.owners) || gotOK != p.ordOK {
			t.Fatalf("step %d: incremental cands %v ordOK %v, rebuild %v ordOK %v", step, owners(gotC), gotOK, owners(p.cands), p.ordOK)
		}
		if !p.ordOK {
			t.Fatalf("step %d: ordinals broken", step)
		}
		for r, name := range gotNames {
			if name != fmt.Sprint(r) {
				t.Fatalf("step %d: rank name %d = %q", step, r, name)
			}
		}
	}
}

func owners(cs []candidate) []kvwire.Owner {
	out := make([]kvwire.Owner, len(cs))
	for i, c := range cs {
		out[i] = c.owner()
	}
	return out
}

// BenchmarkRegisterNth registers one more worker into a partition that already holds n (and
// deletes it again), the cost issue 15 measured at O(n): 40k workers took 312 s.
func BenchmarkRegisterNth(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 40_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			e := newEngine(b, approxConfig())
			for i := 1; i <= n; i++ {
				if _, err := e.UpsertWorker(spec(uint64(i))); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := uint64(n + 1 + i%2)
				if _, err := e.UpsertWorker(spec(id)); err != nil {
					b.Fatal(err)
				}
				if _, err := e.DeleteWorker(id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
