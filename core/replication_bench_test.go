package core

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/core/engine"
)

// Replication benchmarks between two full Services (engine, ledger, bus, NATS) over a real
// nats-server on loopback TCP. One benchmark iteration is one lifecycle event; requests cycle
// through admission (select_and_reserve), prefill_complete and free, so a third of the events
// carry a 16-block admission payload.
//
//	go test ./core -run '^$' -bench Replication -benchtime=20000x

// benchPair starts A and B (peers of each other) on one server and waits until the join
// resync passes (not repeated here) are over, so that none runs during the measurement.
func benchPair(b *testing.B) (a, bb *replica) {
	b.Helper()
	srv := natstest.RunServer(b)
	noRepeat := func(c *ReplicationConfig) { c.JoinResyncRepeat = -1 }
	a = startReplicaWith(b, srv.ClientURL(), "a", noRepeat, "b")
	bb = startReplicaWith(b, srv.ClientURL(), "b", noRepeat, "a")
	natstest.WaitInterestCount(b, srv, "kvselect.v1.resync.lifecycle", 2)
	natstest.WaitFor(b, syncTimeout, func() error {
		for _, r := range []*replica{a, bb} {
			if st := r.br.ResyncStats(); st.Passes == 0 {
				return fmt.Errorf("%s: join pass not done", r.id)
			}
		}
		return nil
	})
	return a, bb
}

// lifecycleOp performs event i on s: admission, prefill completion or free of request i/3.
func lifecycleOp(b *testing.B, s *Service, i int, toks []uint32) {
	id := "r" + strconv.Itoa(i/3)
	var err error
	switch i % 3 {
	case 0:
		toks[0] = uint32(i / 3)
		_, err = s.SelectAndReserve(&SelectRequest{SelectionID: &id, Prompt: Prompt{TokenIDs: toks}})
	case 1:
		err = s.PrefillComplete(id)
	case 2:
		err = s.Free(id)
	}
	if err != nil {
		b.Fatalf("event %d: %v", i, err)
	}
}

// eventIndex maps a received event back to its iteration number.
func eventIndex(ev *engine.ReplicaEvent) int {
	n, err := strconv.Atoi(ev.RequestID[1:])
	if err != nil {
		return -1
	}
	switch ev.Kind {
	case engine.LifecyclePrefillComplete:
		return 3*n + 1
	case engine.LifecycleFree:
		return 3*n + 2
	}
	return 3 * n
}

// BenchmarkReplicationLatency measures lifecycle propagation A→B between two Services: from
// just before A's call until B's engine has applied the event, at a paced 10,000 events/s
// (bursts of 10 every millisecond). Reports p50/p99/max in µs (target p99 <= 2 ms).
func BenchmarkReplicationLatency(b *testing.B) {
	a, bb := benchPair(b)
	n := b.N - b.N%3
	if n == 0 {
		n = 3
	}
	sent := make([]time.Time, n)
	lat := make([]time.Duration, 0, n)
	var mu sync.Mutex
	done := make(chan struct{})
	hook := func(ev *engine.ReplicaEvent, applied bool) {
		now := time.Now()
		i := eventIndex(ev)
		mu.Lock()
		defer mu.Unlock()
		if !applied || i < 0 || i >= n {
			return
		}
		lat = append(lat, now.Sub(sent[i]))
		if len(lat) == n {
			close(done)
		}
	}
	bb.br.appliedHook.Store(&hook)
	toks := make([]uint32, 64)
	for i := range toks {
		toks[i] = uint32(i)
	}
	const burst = 10
	b.ReportAllocs()
	b.ResetTimer()
	next := time.Now()
	for i := range n {
		if i%burst == 0 {
			next = next.Add(time.Millisecond)
			time.Sleep(time.Until(next)) // pacing the load, not synchronisation
		}
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		lifecycleOp(b, a.svc, i, toks)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		b.Fatalf("B applied %d of %d events (A %+v, B %+v)", got, n, a.br.Stats().Lifecycle, bb.br.Stats().Lifecycle)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkReplicationThroughput drives A's lifecycle as fast as one goroutine can and reports
// the events/s A publishes and B applies (end to end, until B has applied the last event it
// will get) and how many were lost (queues full); ns/op is A's cost per event.
func BenchmarkReplicationThroughput(b *testing.B) {
	a, bb := benchPair(b)
	n := b.N - b.N%3
	if n == 0 {
		n = 3
	}
	var applied atomic.Int64
	hook := func(_ *engine.ReplicaEvent, ok bool) {
		if ok {
			applied.Add(1)
		}
	}
	bb.br.appliedHook.Store(&hook)
	toks := make([]uint32, 64)
	for i := range toks {
		toks[i] = uint32(i)
	}
	pub0 := a.br.Stats().Lifecycle.Published
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range n {
		lifecycleOp(b, a.svc, i, toks)
	}
	b.StopTimer()
	issued := time.Since(start)
	// Wait until B stops making progress or has everything.
	last, lastChange := int64(-1), time.Now()
	for applied.Load() < int64(n) && time.Since(lastChange) < time.Second {
		if v := applied.Load(); v != last {
			last, lastChange = v, time.Now()
		}
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
	end := time.Since(start)
	if v := applied.Load(); v < int64(n) {
		end = lastChange.Sub(start)
	}
	st := a.br.Stats().Lifecycle
	got := applied.Load()
	b.ReportMetric(float64(st.Published-pub0)/end.Seconds(), "published-events/s")
	b.ReportMetric(float64(got)/end.Seconds(), "applied-events/s")
	b.ReportMetric(float64(int64(n)-got), "lost-events")
	b.ReportMetric(float64(n)/issued.Seconds(), "issued-events/s")
}

// BenchmarkLedger is the ledger's cost on A's hot path: one admission and one free.
func BenchmarkLedger(b *testing.B) {
	l := ledger{}
	now := time.Unix(0, 0)
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "req-" + strconv.Itoa(i)
	}
	add := engine.ReplicaAdd{TokenSequence: make([]uint64, 16), TrackPrefill: true, PrefillTokens: 64}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := ids[i%len(ids)]
		l.observeLocal(&engine.ReplicaEvent{RequestID: id, Kind: engine.LifecycleAdd, Add: &add}, now)
		l.observeLocal(&engine.ReplicaEvent{RequestID: id, Kind: engine.LifecycleFree}, now)
	}
}
