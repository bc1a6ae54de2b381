package engine

// BenchmarkSelectTwoPhase measures Ray's two-phase flow on the fleet of bench_test.go, through
// the fast path and the general path: the /select that caches a selection (and its
// routing-quality sample, one pass over the ranks) and the replayed POST /reservations that
// books it. BenchmarkSelectPaths covers /select without selection_id and select_and_reserve.
//
//	select-id: POST /select with a selection_id (4096 ids in rotation, so the cache stays bounded);
//	replay:    POST /select with a selection_id, its replayed POST /reservations, and the free.

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/threadcpu"
)

func BenchmarkSelectTwoPhase(b *testing.B) {
	f := getFleet(b)
	e := f.e
	reqs := make([]*SelectRequest, len(f.prompts))
	for i, p := range f.prompts {
		reqs[i] = &SelectRequest{Prompt: tokenPrompt(p)}
	}
	ids := make([]string, 4096)
	for i := range ids {
		ids[i] = fmt.Sprint("twophase-", i)
	}
	for _, path := range []string{"fast", "general"} {
		for _, op := range []string{"select-id", "replay"} {
			b.Run("op="+op+"/path="+path, func(b *testing.B) {
				defer threadcpu.Lock()()
				e.scratch.fast.disabled = path == "general"
				defer func() { e.scratch.fast.disabled = false }()
				var fx []ReplicaEvent
				lat := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				cpu := threadcpu.Now()
				for i := 0; i < b.N; i++ {
					req, id := reqs[i%len(reqs)], &ids[i%len(ids)]
					req.SelectionID = id
					t := time.Now()
					_, err := e.Select(req, t0)
					if err == nil && op == "replay" {
						_, err = e.Reserve(&ReservationRequest{SelectionID: id}, t0)
					}
					lat = append(lat, time.Since(t))
					if err != nil {
						b.Fatal(err)
					}
					if op == "replay" {
						if err := e.Free(*id); err != nil {
							b.Fatal(err)
						}
						fx = e.TakeEffects(fx[:0])
					}
				}
				cpu = threadcpu.Now() - cpu
				b.StopTimer()
				for _, r := range reqs {
					r.SelectionID = nil
				}
				for _, id := range ids {
					e.pending.remove(defKey, id)
				}
				b.ReportMetric(float64(cpu)/float64(b.N), "thread-cpu-ns/op")
				reportLatency(b, f, lat)
			})
		}
	}
}
