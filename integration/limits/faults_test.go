//go:build fault

package limits

import (
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The full fault runs of issue 15 (build tag fault). Each logs one "scenario:" line with
// failed requests, peak RSS and the limit that acted. KVSELECT_LIMITS_BIN=<binary> runs them
// against another build (the numbers in the README's "Limits" section compare the build before
// the limits with this one); flags that build does not know are then left out.
//
//	go test -tags fault -run Fault -v -timeout 30m ./integration/limits/

// newFlags returns args, or nothing when measuring another build.
func newFlags(args ...string) []string {
	if os.Getenv("KVSELECT_LIMITS_BIN") != "" {
		return nil
	}
	return args
}

// TestFaultHugeBookingStall: /select latency while two clients loop huge bookings (issue 15:
// 250k hashes; p99 243 ms from 0.5 ms). With the limits the 250k-hash bookings are refused
// (413) and the largest allowed ones (65,536 hashes) are looped instead.
func TestFaultHugeBookingStall(t *testing.T) {
	for _, mode := range []struct {
		name string
		env  []string
	}{{"kv-events", nil}, {"approx", []string{"DYN_ROUTER_USE_KV_EVENTS=false"}}} {
		for _, n := range []int{250_000, 65_536} {
			t.Run(fmt.Sprintf("%s/%d", mode.name, n), func(t *testing.T) {
				s := startServer(t, mode.env)
				registerWorkers(t, s, 8, nil)
				base := s.rssKiB()
				alone, loaded, ok, refused := selectUnderHugeBookings(t, s, 2, n, 10*time.Second)
				t.Logf("scenario: %s %d-hash booking loop: /select alone p50 %v p99 %v; loaded p50 %v p99 %v (n=%d, failed %d); bookings ok %d refused %d; RSS base %d MiB peak %d MiB",
					mode.name, n, alone.p50, alone.p99, loaded.p50, loaded.p99, loaded.n, alone.failed+loaded.failed, ok, refused, base/mib, s.peakKiB()/mib)
				if alone.failed+loaded.failed != 0 {
					t.Errorf("%d selections failed", alone.failed+loaded.failed)
				}
			})
		}
	}
}

// TestFaultValidBlockFlood: 2M valid blocks for a worker that declared 4,096.
func TestFaultValidBlockFlood(t *testing.T) {
	entries, failed, base, peak, evicted := hostileZMQ(t, 2_000_000)
	t.Logf("scenario: valid-block flood 2M blocks (declared 4096): index entries %v, evicted %v (limit index_rank_blocks), failed selections %d, RSS base %d MiB peak %d MiB",
		entries, evicted, failed, base/mib, peak/mib)
	if failed != 0 {
		t.Errorf("%d selections failed", failed)
	}
}

// TestFaultApproxFlood: 40 bookings of 250k blocks in approximate mode (issue 15: 3.7 GB),
// then 40 of 65,536 (the most a request may carry).
func TestFaultApproxFlood(t *testing.T) {
	s := startServer(t, []string{"DYN_ROUTER_USE_KV_EVENTS=false"})
	registerWorkers(t, s, 8, nil)
	base := s.rssKiB()
	c := &http.Client{}
	var ok, refused int
	for _, n := range []int{250_000, 65_536} {
		for i := range 40 {
			code, _, err := post(c, s.url+"/select_and_reserve", hashBody(fmt.Sprintf("ap-%d-%d", n, i), n, n+i))
			if err != nil {
				t.Fatal(err)
			}
			if code == http.StatusOK {
				ok++
			} else {
				refused++
			}
		}
	}
	t.Logf("scenario: approx flood 40x250k + 40x65536 hashes: booked %d refused %d (request_size), approx entries %v, pruned %v (limit approx_blocks_pruned); RSS base %d MiB peak %d MiB now %d MiB",
		ok, refused, s.labeled("kvselect_limit_size", `table="approx_blocks_per_partition"`), s.labeled("kvselect_limit_events_total", `limit="approx_blocks_pruned"`),
		base/mib, s.peakKiB()/mib, s.rssKiB()/mib)
}

// TestFaultBookingFlood: clients book without ever freeing for 20 s (issue 15: only the 300 s
// guard, ~2.6M bookings, 7-8 GB).
func TestFaultBookingFlood(t *testing.T) {
	s := startServer(t, nil)
	registerWorkers(t, s, 8, nil)
	base := s.rssKiB()
	var ok, refused, failed atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(20 * time.Second)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &http.Client{}
			for i := 0; time.Now().Before(end); i++ {
				body := fmt.Appendf(nil, `{"selection_id":"f-%d-%d","token_ids":[%d,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]}`, c, i, i)
				code, _, err := post(cl, s.url+"/select_and_reserve", body)
				switch {
				case err != nil:
					failed.Add(1)
				case code == http.StatusOK:
					ok.Add(1)
				case code == http.StatusTooManyRequests:
					refused.Add(1)
				default:
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	sel := selectLoop(s, 2*time.Second)
	t.Logf("scenario: booking flood 20 s, 4 clients: booked %d, refused %d (429, limit bookings/bookings_per_worker), failed %d; /select after p99 %v failed %d; live bookings %v; RSS base %d MiB peak %d MiB",
		ok.Load(), refused.Load(), failed.Load(), sel.p99, sel.failed, s.labeled("kvselect_limit_size", `table="bookings"`), base/mib, s.peakKiB()/mib)
	if failed.Load() != 0 || sel.failed != 0 {
		t.Errorf("failed requests: %d bookings, %d selections", failed.Load(), sel.failed)
	}
}

// TestFaultWorkerFlood: register workers as fast as possible for 60 s (issue 15: 100k
// workers → 2 GB; the 40k-th took O(n)).
func TestFaultWorkerFlood(t *testing.T) {
	s := startServer(t, []string{"DYN_ROUTER_USE_KV_EVENTS=false"})
	base := s.rssKiB()
	var ok, refused, failed atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(60 * time.Second)
	var next atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &http.Client{}
			for time.Now().Before(end) {
				i := next.Add(1)
				if i > 100_000 {
					return
				}
				body := fmt.Appendf(nil, `{"worker_id":%d,"endpoint":"http://w%d:8000","block_size":16}`, i, i)
				code, _, err := post(cl, s.url+"/workers", body)
				switch {
				case err != nil:
					failed.Add(1)
				case code/100 == 2:
					ok.Add(1)
				case code == http.StatusInsufficientStorage:
					refused.Add(1)
				default:
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	sel := selectLoop(s, 3*time.Second)
	t.Logf("scenario: worker flood 60 s: registered %d, refused %d (507, limit workers), failed %d; /select after p50 %v p99 %v (failed %d); RSS base %d MiB peak %d MiB",
		ok.Load(), refused.Load(), failed.Load(), sel.p50, sel.p99, sel.failed, base/mib, s.peakKiB()/mib)
}

// TestFaultSlowBodies: 200 clients send 8 MiB − 1 bytes and stall (issue 15: +1.6 GiB held
// forever). With the default budget most are refused at once; without it the read deadline
// cuts them and the memory is returned.
func TestFaultSlowBodies(t *testing.T) {
	if os.Getenv("KVSELECT_LIMITS_BIN") != "" {
		s := startServer(t, nil)
		base := s.rssKiB()
		stallUploads(t, s.addr, 200, 8<<20, 8<<20-1)
		var peak int64
		for end := time.Now().Add(40 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			peak = max(peak, s.rssKiB())
		}
		t.Logf("scenario: 200 stalled 8 MiB uploads (other build): RSS base %d MiB peak %d MiB, 40 s later %d MiB", base/mib, max(peak, s.peakKiB())/mib, s.rssKiB()/mib)
		return
	}
	for _, tc := range []struct {
		name string
		args []string
	}{{"default budget", []string{"--http-read-timeout", "5s"}}, {"no budget", []string{"--http-read-timeout", "5s", "--http-max-body-bytes-in-flight", "0"}}} {
		t.Run(tc.name, func(t *testing.T) {
			base, peak, settled, srv := slowBodies(t, 200, tc.args...)
			t.Logf("scenario: 200 stalled 8 MiB uploads, %s: RSS base %d MiB peak %d MiB settled %d MiB; cut %v (408, limit read timeout), refused %v (503, limit body budget)",
				tc.name, base/mib, peak/mib, settled/mib, srv.metric("kvselect_http_body_timeouts_total"), srv.metric("kvselect_http_body_budget_rejected_total"))
		})
	}
}
