package kvlisten

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/internal/poll"
)

// countHandler counts applied batches and signals when target is reached.
type countHandler struct {
	n      atomic.Uint64
	target uint64
	done   chan struct{}
}

func (h *countHandler) Apply(seq uint64, payload []byte, replayed bool) error {
	if h.n.Add(1) == h.target {
		close(h.done)
	}
	return nil
}

func (h *countHandler) Restarted(prev, seq uint64) {}

// BenchmarkLoopbackThroughput measures end-to-end PUB→SUB→Handler over
// 127.0.0.1 with a go-zeromq publisher in the same process (so the publisher's
// cost and allocations are included). One op = one batch.
func BenchmarkLoopbackThroughput(b *testing.B) {
	for _, size := range []int{256, 6 << 10} {
		b.Run(fmt.Sprintf("payload=%dB", size), func(b *testing.B) {
			p := newTestPub(b, pubOpts{})
			h := &countHandler{target: uint64(b.N) + 1, done: make(chan struct{})}
			l, err := Start(context.Background(), Config{Endpoint: p.pubEP, Handler: h, Logger: testLogger(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			p.waitSubscribed()
			topic, payload := []byte("kv-events"), make([]byte, size)
			send := func(seq uint64) {
				if err := p.pub.SendMulti(zmq4.NewMsgFrom(topic, encodeSeq(seq), payload)); err != nil {
					b.Fatal(err)
				}
			}
			send(0) // warm-up batch, also proves delivery
			poll.True(b, poll.Generous, "warm-up", func() bool { return h.n.Load() == 1 })
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 1; i <= b.N; i++ {
				send(uint64(i))
			}
			select {
			case <-h.done:
			case <-time.After(time.Minute):
				b.Fatalf("only %d of %d batches arrived; state %+v", h.n.Load(), h.target, l.State())
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "batches/s")
			if st := l.State(); st.Lost != 0 || st.Gaps != 0 {
				b.Fatalf("loss on loopback: %+v", st)
			}
		})
	}
}

// BenchmarkHandleInOrder measures the processor's per-batch bookkeeping
// (classification, watermark, counters, and the payload hash kept for the
// incarnation probe when replay is configured), without sockets.
func BenchmarkHandleInOrder(b *testing.B) {
	for _, replay := range []bool{false, true} {
		b.Run(fmt.Sprintf("replay=%v", replay), func(b *testing.B) {
			cfg, err := Config{Endpoint: "tcp://127.0.0.1:1", Handler: &countHandler{done: make(chan struct{})}}.withDefaults()
			if err != nil {
				b.Fatal(err)
			}
			l := &Listener{cfg: cfg, log: cfg.Logger, ctx: context.Background(), seed: maphash.MakeSeed()}
			if replay {
				l.rp = &replayer{ep: "tcp://127.0.0.1:1"}
			}
			payload := make([]byte, 1024)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.handle(liveMsg{seq: uint64(i), payload: payload, epoch: 1})
			}
		})
	}
}
