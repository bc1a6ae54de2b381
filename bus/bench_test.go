package bus

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/kvwire"
)

// BenchmarkLifecyclePropagation measures how long a lifecycle event takes
// from PublishLifecycle on replica A to B's OnLifecycle callback, over a
// real nats-server on loopback TCP, at a paced 10,000 events/s (bursts of
// 10 every millisecond). It reports p50/p99/max latency in µs; the target
// is p99 <= 2 ms. Each b.N is one event.
func BenchmarkLifecyclePropagation(b *testing.B) {
	srv := natstest.RunServer(b)
	connA, err := Connect(ConnConfig{Name: "bench-a", URLs: srv.ClientURL()})
	if err != nil {
		b.Fatal(err)
	}
	defer connA.Close()
	connB, err := Connect(ConnConfig{Name: "bench-b", URLs: srv.ClientURL()})
	if err != nil {
		b.Fatal(err)
	}
	defer connB.Close()

	sent := make([]time.Time, b.N)
	lat := make([]time.Duration, 0, b.N)
	var mu sync.Mutex
	done := make(chan struct{})
	a, err := New(Config{Cluster: "bench", ReplicaID: "a"}, connA, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	rb, err := New(Config{Cluster: "bench", ReplicaID: "b", Peers: []string{"a"},
		OnLifecycle: func(ev *Lifecycle) {
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if i := int(ev.Worker); i < len(sent) {
				lat = append(lat, now.Sub(sent[i]))
				if len(lat) == len(sent) {
					close(done)
				}
			}
		}}, connB, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Close()
	natstest.WaitInterest(b, srv, a.Subjects().LifecycleFrom(a.ReplicaID()))

	const burst = 10 // 10 events per ms = 10k events/s
	tokens := make([]uint64, 32)
	b.ReportAllocs()
	b.ResetTimer()
	next := time.Now()
	for i := range b.N {
		if i%burst == 0 {
			next = next.Add(time.Millisecond)
			time.Sleep(time.Until(next)) // pacing the load, not synchronisation
		}
		ev := &Lifecycle{Model: "m", Group: "g", BlockSize: 16, RequestID: "req", Owner: kvwire.Owner{Worker: uint64(i)},
			Kind: LifecycleAdd, Add: &AddData{TokenSequence: tokens, TrackPrefill: true, ISL: 512}}
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		a.PublishLifecycle(ev)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		st := rb.Stats().Lifecycle
		b.Fatalf("lost events: %d of %d arrived (b stats %+v, a stats %+v)", len(lat), b.N, st, a.Stats().Lifecycle)
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
	if testing.Verbose() {
		b.Logf("n=%d p50=%vµs p99=%vµs", len(lat), pct(0.5), pct(0.99))
	}
}
