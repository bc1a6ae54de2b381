//go:build faults

package limits

import (
	"testing"
	"time"
)

// TestFaultHugeBookingStall: /select latency while two clients loop 250k-hash bookings
// (issue 15: p99 243 ms from 0.5 ms). Run with both index modes.
func TestFaultHugeBookingStall(t *testing.T) {
	for _, mode := range []struct {
		name string
		env  []string
	}{{"kv-events", nil}, {"approx", []string{"DYN_ROUTER_USE_KV_EVENTS=false"}}} {
		t.Run(mode.name, func(t *testing.T) {
			s := startServer(t, mode.env)
			registerWorkers(t, s, 8, nil)
			base := s.rssKiB()
			alone, loaded, ok, refused := selectUnderHugeBookings(t, s, 2, 250_000, 10*time.Second)
			t.Logf("%s: /select alone p50 %v p99 %v (n=%d, failed %d); with 2×250k-hash booking loop p50 %v p99 %v (n=%d, failed %d); bookings ok %d refused %d; RSS base %d MiB peak %d MiB",
				mode.name, alone.p50, alone.p99, alone.n, alone.failed, loaded.p50, loaded.p99, loaded.n, loaded.failed, ok, refused, base/mib, s.peakKiB()/mib)
			if alone.failed+loaded.failed != 0 {
				t.Errorf("%d selections failed", alone.failed+loaded.failed)
			}
		})
	}
}
