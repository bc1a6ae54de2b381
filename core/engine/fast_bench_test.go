package engine

// Benchmarks of the selection fast path's stages (fast.go) on the fleet of bench_test.go, to
// attribute its cost: the index match merged into per-rank overlap, the booked prefix by ordinal,
// the cost loop over every rank (loads read in place), the reservoir pick, and the whole
// chooseFast. Compare with BenchmarkSelectSteps (the general path's stages).

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/threadcpu"
)

// BenchmarkSelectPaths measures whole selections on the fleet through the fast path and, in the
// same process, with it disabled (the general path), so one run compares both under the same
// machine conditions. Besides ns/op and p50/p99 it reports thread-cpu-ns/op: CPU time of the
// benchmark's own thread, insensitive to waiting for a core on a shared machine.
//
//	select:  POST /select without selection_id (query only);
//	reserve: POST /select_and_reserve followed by the booking's free.
func BenchmarkSelectPaths(b *testing.B) {
	f := getFleet(b)
	e := f.e
	reqs := make([]*SelectRequest, len(f.prompts))
	for i, p := range f.prompts {
		reqs[i] = &SelectRequest{Prompt: tokenPrompt(p)}
	}
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = fmt.Sprint("paths-", i)
	}
	for _, path := range []string{"fast", "general", "fast-kvselect"} {
		for _, op := range []string{"select", "reserve"} {
			b.Run("op="+op+"/path="+path, func(b *testing.B) {
				defer threadcpu.Lock()()
				e.scratch.fast.disabled = path == "general"
				defer func() { e.scratch.fast.disabled = false }()
				if path == "fast-kvselect" { // kvselect's own cost policy on the same fleet
					e.cfg.Policy = PolicyKVSelect
					defer func() { e.cfg.Policy = PolicyDynamo }()
				}
				var fx []ReplicaEvent
				lat := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				cpu := threadcpu.Now()
				for i := 0; i < b.N; i++ {
					req := reqs[i%len(reqs)]
					t := time.Now()
					var err error
					if op == "select" {
						req.SelectionID = nil
						_, err = e.Select(req, t0)
					} else {
						req.SelectionID = &ids[i%len(ids)]
						_, err = e.SelectAndReserve(req, t0)
					}
					lat = append(lat, time.Since(t))
					if err != nil {
						b.Fatal(err)
					}
					if op == "reserve" {
						if err := e.Free(ids[i%len(ids)]); err != nil {
							b.Fatal(err)
						}
						fx = e.TakeEffects(fx[:0])
					}
				}
				cpu = threadcpu.Now() - cpu
				b.StopTimer()
				b.ReportMetric(float64(cpu)/float64(b.N), "thread-cpu-ns/op")
				reportLatency(b, f, lat)
			})
		}
	}
}

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
			if err := e.chooseFast(s, nil, false, BusyRule{}, false); err != nil {
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
	// kvselect's cost pass (kvselectPolicy.fast: partition aggregates, then every rank's cost and
	// the fused pick) on the index match and booked prefix chooseFast left behind.
	b.Run("kvselect_cost", func(b *testing.B) {
		e.cfg.Policy = PolicyKVSelect
		wk := e.weightsFor(nil)
		e.cfg.Policy = PolicyDynamo
		fs := &e.scratch.fast
		s := &selection{p: p, w: wk}
		if err := e.chooseFast(s, nil, false, BusyRule{}, false); err != nil { // sizes the scratch
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			s.norm = norms[i%len(norms)]
			fs.mask, fs.draw, fs.pick = nil, true, argmin{best: -1, rng: e.rng}
			wk.policy.fast(e, s)
		}
	})
	b.Run("pick", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			a := argmin{best: -1, rng: e.rng}
			for j, c := range e.scratch.fast.cost {
				a.offer(j, c)
			}
		}
	})
}
