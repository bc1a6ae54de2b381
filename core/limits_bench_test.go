package core

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine"
)

// BenchmarkSelectUnderHugeBooking measures small /select calls on the service while another
// goroutine loops bookings of 65,536 explicit hashes (and frees them), in both index modes.
// It reports the selections' p50 and p99: the lock time a huge booking costs everyone else.
//
//	go test ./core -run '^$' -bench SelectUnderHugeBooking -benchtime 3s -count 5
func BenchmarkSelectUnderHugeBooking(b *testing.B) {
	for _, approx := range []bool{false, true} {
		b.Run(fmt.Sprintf("approx=%v", approx), func(b *testing.B) {
			cfg := engine.DefaultConfig()
			cfg.UseKVEvents = !approx
			svc, err := NewLocal(cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer svc.Close()
			for i := uint64(1); i <= 8; i++ {
				bs, ep, kv := uint32(16), fmt.Sprintf("http://w%d:8000", i), fmt.Sprintf("tcp://127.0.0.1:%d", 20000+i)
				if _, err := svc.UpsertWorker(WorkerSpec{WorkerID: &i, Endpoint: &ep, KVEventsEndpoint: &kv, BlockSize: &bs}); err != nil {
					b.Fatal(err)
				}
			}
			const n = 65_536
			stop, first := make(chan struct{}), make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if i == 1 {
						close(first) // one huge booking done: the loop is in steady state
					}
					select {
					case <-stop:
						return
					default:
					}
					h := make([]int64, n)
					for j := range h {
						h[j] = int64(i)*1_000_003 + int64(j)
					}
					id, isl := fmt.Sprint("huge-", i), uint64(n*16)
					if _, err := svc.SelectAndReserve(&SelectRequest{SelectionID: &id, Prompt: engine.Prompt{BlockHashes: h, SequenceHashes: h, ISLTokens: &isl}}); err == nil {
						_ = svc.Free(id)
					}
				}
			}()
			tokens := make([]uint32, 64)
			for i := range tokens {
				tokens[i] = uint32(i)
			}
			<-first
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tokens[0] = uint32(i)
				st := time.Now()
				if _, err := svc.Select(&SelectRequest{Prompt: engine.Prompt{TokenIDs: tokens}}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(st))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)*999/1000].Microseconds()), "p99.9-µs")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
		})
	}
}
