package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/internal/poll"
)

// End-to-end ingestion benchmarks over loopback ZeroMQ (issue 3). A go-zeromq PUB in the test
// process plays the engine; the service's real listener dials it, decodes every batch and
// applies it to the engine under the service lock. Workers are registered over HTTP.
//
//   - BenchmarkKVEventsLoopbackZMQ: sustained batches/s and block operations/s from PUB send to
//     applied (the publisher's encoding is done beforehand; its sending cost shares the CPU).
//   - BenchmarkKVEventsSelectUnderIngest: /select latency (HTTP, and the in-process Select
//     call) while a paced publisher runs at half the ingestion capacity measured just before,
//     next to the same measurement with ingestion idle. Reports p50/p99 in µs.
//
// Run: go test ./integration -short -run '^$' -bench KVEvents -benchtime 10000x
// (-short skips building the cluster binaries, which these benchmarks do not need).

// benchBS is the block size of the benchmark workers.
const benchBS = 16

// benchPub is a go-zeromq PUB with its sequence counter. go-zeromq's PUB queues without a
// high-water mark, so a publisher faster than the listener never drops: every sent batch is
// eventually applied, which the benchmarks check. Only one goroutine publishes at a time.
type benchPub struct {
	pub   zmq4.Socket
	ep    string
	seq   uint64
	topic []byte
}

func newBenchPub(b *testing.B) *benchPub {
	b.Helper()
	pub := zmq4.NewPub(context.Background())
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pub.Close() })
	return &benchPub{pub: pub, ep: "tcp://" + pub.Addr().String(), topic: []byte("kv-events")}
}

// send publishes one payload with the next sequence number.
func (p *benchPub) send(b *testing.B, payload []byte) {
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], p.seq)
	p.seq++
	if err := p.pub.SendMulti(zmq4.NewMsgFrom(p.topic, seq[:], payload)); err != nil {
		b.Fatal(err)
	}
}

// benchHash is the engine hash of block i of prompt p.
func benchHash(p, i int) uint64 { return 1<<63 | uint64(p)<<24 | uint64(i) }

// benchChain is a BlockStored of blocks [0, n) of prompt p with content distinct per prompt.
func benchChain(p, n int) kvevents.Event {
	ev := kvevents.Event{Kind: kvevents.KindBlockStored, BlockSize: benchBS, TokenIDs: benchPrompt(p, n)}
	for i := range n {
		ev.BlockHashes = append(ev.BlockHashes, benchHash(p, i))
	}
	return ev
}

// benchPrompt is the token content of prompt p (n blocks).
func benchPrompt(p, n int) []uint32 {
	toks := make([]uint32, n*benchBS)
	for i := range toks {
		toks[i] = uint32(p)*7919 + uint32(i)
	}
	return toks
}

// benchRing is a ring of encoded batches in steady state: batch i stores 8 fresh 4-block chains
// and removes the 8 chains stored 256 batches earlier (64 block operations per batch, a busy
// vLLM scheduler step).
func benchRing() (payloads [][]byte, opsPerBatch int) {
	const batches, stores, chain, window = 1024, 8, 4, 256
	for i := range batches {
		var evs []kvevents.Event
		for j := range stores {
			evs = append(evs, benchChain(i*stores+j, chain))
		}
		old := (i - window + batches) % batches
		for j := range stores {
			ev := kvevents.Event{Kind: kvevents.KindBlockRemoved}
			for k := range chain {
				ev.BlockHashes = append(ev.BlockHashes, benchHash(old*stores+j, k))
			}
			evs = append(evs, ev)
		}
		payloads = append(payloads, kvevents.AppendBatch(nil, &kvevents.Batch{TS: 1.7e9, Events: evs, HasDPRank: true}))
	}
	return payloads, 2 * stores * chain
}

// benchSetup registers worker 1 (events from p) and three more workers whose endpoints nobody
// serves (they stay schedulable without events, so /select scores four candidates), warms the
// index with one full pass of the ring plus a 64-block prompt that the select benchmark asks
// for, and waits until all of it is applied.
func benchSetup(b *testing.B, h *kvHarness, p *benchPub, ring [][]byte) []uint32 {
	b.Helper()
	for id := 1; id <= 4; id++ {
		ep := p.ep
		if id > 1 {
			ep = "tcp://127.0.0.1:1" // nothing listens: the listener retries with backoff
		}
		h.must(b, http.StatusCreated, "POST", "/workers", map[string]any{
			"worker_id": id, "model_name": "bench", "endpoint": fmt.Sprintf("http://w%d:8000", id),
			"block_size": benchBS, "kv_events_endpoint": ep,
		}, nil)
	}
	h.waitActive(b, 1, 0, p.ep)
	// The first batches may be lost until the subscription reaches the PUB (slow joiner):
	// publish empty batches until one is applied.
	empty := kvevents.AppendBatch(nil, &kvevents.Batch{TS: 1.7e9, HasDPRank: true})
	nudge := func() uint64 { p.send(b, empty); return p.seq - 1 }
	h.waitWatermark(b, 1, 0, nudge(), nudge)
	for _, pl := range ring {
		p.send(b, pl)
	}
	hot := 1 << 20 // a prompt id outside the ring
	p.send(b, kvevents.AppendBatch(nil, &kvevents.Batch{TS: 1.7e9, Events: []kvevents.Event{benchChain(hot, 64)}, HasDPRank: true}))
	benchWaitApplied(b, h.svc, p.seq-1)
	return benchPrompt(hot, 64)
}

// benchWaitApplied polls (without sleeping more than a tick) until worker 1's listener has
// applied seq.
func benchWaitApplied(b *testing.B, svc *core.Service, seq uint64) {
	b.Helper()
	err := poll.Poll(60*time.Second, 100*time.Microsecond, func() error {
		for _, r := range svc.Workers("bench", "") {
			if l, ok := r.Listeners["0"]; ok && r.WorkerID == 1 && l.Watermark != nil && *l.Watermark >= seq {
				return nil
			}
		}
		return fmt.Errorf("listener did not apply seq %d within 60s", seq)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkKVEventsLoopbackZMQ: one op = one batch of 64 block operations, published by a Go
// PUB and applied by the service's listener.
func BenchmarkKVEventsLoopbackZMQ(b *testing.B) {
	h := newKVHarness(b)
	p := newBenchPub(b)
	ring, ops := benchRing()
	benchSetup(b, h, p, ring)
	// Timed: sending b.N batches and waiting until the last one is applied, so the rate is
	// the sustained end-to-end rate, not the publisher's enqueue rate.
	before := h.svc.Stats()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.send(b, ring[i%len(ring)])
	}
	benchWaitApplied(b, h.svc, p.seq-1)
	b.StopTimer()
	st := h.svc.Stats()
	if n := st.KVBatches - before.KVBatches; n != uint64(b.N) {
		b.Fatalf("applied %d batches, want %d", n, b.N)
	}
	got := (st.KV.StoredBlocks - before.KV.StoredBlocks) + (st.KV.RemovedBlocks - before.KV.RemovedBlocks)
	if got != b.N*ops {
		b.Fatalf("applied %d block operations, want %d", got, b.N*ops)
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "batches/s")
	b.ReportMetric(float64(got)/sec, "blockops/s")
}

// BenchmarkKVEventsSelectUnderIngest measures /select latency with ingestion idle and at half
// its capacity. The capacity is measured first (a one-second full-speed burst); a pacer then
// publishes every millisecond the number of batches that keeps the rate at half of it, and
// the paced rate actually achieved is reported. One op = one selection.
func BenchmarkKVEventsSelectUnderIngest(b *testing.B) {
	h := newKVHarness(b)
	p := newBenchPub(b)
	ring, _ := benchRing()
	prompt := benchSetup(b, h, p, ring)

	// Capacity: send for one second at full speed, then wait until applied.
	start, n := time.Now(), 0
	for time.Since(start) < time.Second {
		p.send(b, ring[n%len(ring)])
		n++
	}
	benchWaitApplied(b, h.svc, p.seq-1)
	capacity := float64(n) / time.Since(start).Seconds()

	body, err := json.Marshal(map[string]any{"model_name": "bench", "token_ids": prompt})
	if err != nil {
		b.Fatal(err)
	}
	client := h.srv.Client()
	httpSelect := func() { // the body is encoded once: only the round trip is timed
		resp, err := client.Post(h.srv.URL+"/select", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("/select = %d", resp.StatusCode)
		}
	}
	model := "bench"
	modes := []struct {
		name string
		sel  func()
	}{
		{"http", httpSelect},
		{"inprocess", func() {
			req := &core.SelectRequest{ModelName: &model}
			req.TokenIDs = prompt
			if _, err := h.svc.Select(req); err != nil {
				b.Fatal(err)
			}
		}},
	}
	for _, load := range []struct {
		name string
		rate float64 // batches/s
	}{{"idle", 0}, {"ingest-half", capacity / 2}} {
		for _, m := range modes {
			b.Run(load.name+"/"+m.name, func(b *testing.B) {
				stop, done := make(chan struct{}), make(chan int)
				go benchPace(b, p, ring, load.rate, stop, done)
				lat := make([]time.Duration, b.N)
				b.ResetTimer()
				t0 := time.Now()
				for i := 0; i < b.N; i++ {
					s := time.Now()
					m.sel()
					lat[i] = time.Since(s)
				}
				elapsed := time.Since(t0)
				b.StopTimer()
				close(stop)
				sent := <-done
				benchWaitApplied(b, h.svc, p.seq-1) // no backlog into the next sub-benchmark
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
				b.ReportMetric(float64(sent)/elapsed.Seconds(), "ingest-batches/s")
				b.ReportMetric(capacity, "capacity-batches/s")
			})
		}
	}
}

// benchPace publishes ring batches at rate batches/s (0: none) until stop is closed, then
// reports how many it sent. It runs on its own goroutine and touches p only there (the
// benchmark goroutine does not publish meanwhile). Each millisecond it sends the batches due
// since the start, so short stalls are caught up rather than lost.
func benchPace(b *testing.B, p *benchPub, ring [][]byte, rate float64, stop <-chan struct{}, done chan<- int) {
	sent := 0
	defer func() { done <- sent }()
	if rate <= 0 {
		<-stop
		return
	}
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			due := int(rate * time.Since(start).Seconds())
			for ; sent < due; sent++ {
				var seq [8]byte
				binary.BigEndian.PutUint64(seq[:], p.seq)
				p.seq++
				if err := p.pub.SendMulti(zmq4.NewMsgFrom(p.topic, seq[:], ring[sent%len(ring)])); err != nil {
					b.Error(err)
					return
				}
			}
		}
	}
}
