package mockworker_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/integration/mockworker"
	"github.com/kvselect/kvselect/internal/poll"
)

// BenchmarkServeIntoKVSelect measures the whole event path per request: a mock worker (instant
// clock) serves a fresh 1024-token prompt — 64 new blocks stored and, once the 4096-block cache
// is full, 64 evicted — publishes the batch over real loopback ZeroMQ, and kvselect's listener
// decodes and indexes it. The timer stops only when kvselect has applied every batch, so
// ns/op is the sustained end-to-end cost; blocks/s counts stored blocks.
func BenchmarkServeIntoKVSelect(b *testing.B) {
	svc, err := core.New(core.Config{Engine: engine.DefaultConfig(), Seed: 3})
	if err != nil {
		b.Fatal(err)
	}
	svc.Start()
	svc.EnableKVEvents()
	svc.OpenGate()
	defer svc.Close()
	w, err := mockworker.New(mockworker.Config{
		BlockSize: e2eBlock, NumGPUBlocks: 4096, ReplayEndpoint: "tcp://127.0.0.1:0",
		Clock: mockworker.NewInstantClock(time.Unix(0, 0)),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	id, bs, ep, rep, url := uint64(1), uint32(e2eBlock), w.Endpoints()[0], w.ReplayEndpoints()[0], "http://mock"
	if _, err := svc.UpsertWorker(core.WorkerSpec{WorkerID: &id, Endpoint: &url, BlockSize: &bs, KVEventsEndpoint: &ep, ReplayEndpoint: &rep}); err != nil {
		b.Fatal(err)
	}
	poll.True(b, poll.Generous, "subscription", func() bool { return w.Subscribed(0) })
	rng := rand.New(rand.NewPCG(5, 6))
	p := make([]uint32, 1024)
	zero := 0
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N { // not b.Loop: the catch-up wait below must stay timed
		for i := range p {
			p[i] = rng.Uint32N(1 << 20)
		}
		if _, err := w.Serve(ctx, mockworker.Request{PromptTokenIDs: p, MaxTokens: &zero}); err != nil {
			b.Fatal(err)
		}
	}
	next := w.Stats()[0].Publisher.NextSeq
	err = poll.Poll(60*time.Second, 100*time.Microsecond, func() error {
		if l := svc.Workers("", "")[0].Listeners["0"]; l.Watermark == nil || *l.Watermark+1 != next {
			return errors.New("kvselect did not catch up")
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(w.Stats()[0].StoredBlocks)/b.Elapsed().Seconds(), "blocks/s")
}
