package core

import (
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
)

// BenchmarkQueueParkAndDispatch measures the router queue's own cost per request: a request
// parks behind a busy rank (classification, probe, limit check, heap push) and is dispatched
// when the busy booking is freed (probe of the head, selection, booking, hand-off), all on one
// goroutine through the internal steps the waiting API runs. Compare with BenchmarkSelectPaths
// in core/engine for the selection alone.
func BenchmarkQueueParkAndDispatch(b *testing.B) {
	for _, depth := range []int{1, 64} {
		b.Run(fmt.Sprintf("parked=%d", depth), func(b *testing.B) {
			cfg := engine.KVSelectDefaults()
			cfg.UseKVEvents = false
			cfg.QueueThreshold = ptr(0.5)
			svc, err := New(Config{Engine: cfg, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer svc.Close()
			if _, err := svc.UpsertWorker(WorkerSpec{WorkerID: ptr(uint64(1)), Endpoint: ptr("http://w1"),
				BlockSize: ptr(uint32(16)), MaxNumBatchedTokens: ptr(uint64(1 << 20))}); err != nil {
				b.Fatal(err)
			}
			reqs := make([]*SelectRequest, depth)
			for i := range reqs {
				reqs[i] = &SelectRequest{Prompt: engine.Prompt{TokenIDs: tokens(1000*i, 256)}}
			}
			busy := func(id string) {
				if _, err := svc.Reserve(&ReservationRequest{SelectionID: ptr(id), WorkerID: ptr(uint64(1)),
					Prompt:                 engine.Prompt{SequenceHashes: []int64{}, ISLTokens: ptr(uint64(1 << 20))},
					EffectivePrefillTokens: ptr(uint64(1 << 20))}); err != nil {
					b.Fatal(err)
				}
			}
			waiters := make([]*waiter, depth)
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n += depth {
				id := fmt.Sprint("busy-", n)
				busy(id)
				for i, r := range reqs {
					var err error
					if waiters[i], err = parkNow(svc, r, true); err != nil {
						b.Fatal(err)
					}
				}
				if err := svc.Free(id); err != nil { // dispatches every parked request
					b.Fatal(err)
				}
				for _, w := range waiters {
					r := <-w.done
					if r.Err != nil {
						b.Fatal(r.Err)
					}
					if err := svc.Free(*r.Resp.SelectionID); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
