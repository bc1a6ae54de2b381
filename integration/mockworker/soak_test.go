//go:build soak

package mockworker_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/integration/mockworker"
	"github.com/kvselect/kvselect/internal/poll"
)

// TestSoakConcurrentWithFaults (go test -tags soak -run Soak ./integration/mockworker) runs
// many concurrent clients against four real-time mock workers routed by kvselect, while live
// batches are dropped at random (repaired by replay) and one worker restarts mid-run; at the
// end kvselect's index must equal every mock's cache exactly.
func TestSoakConcurrentWithFaults(t *testing.T) {
	const workers, clients, perClient = 4, 16, 150
	svc := startService(t)
	mocks := make([]*mock, workers)
	for i := range mocks {
		mocks[i] = startMock(t, mockworker.Config{BlockSize: e2eBlock, NumGPUBlocks: 64, Speedup: 200, ReplayEndpoint: "tcp://127.0.0.1:0"})
		register(t, svc, uint64(i+1), mocks[i])
	}
	docs := make([][]uint32, 64)
	for i := range docs {
		docs[i] = span(uint32(i+1)*100000, (2+i%10)*e2eBlock)
	}
	var mu sync.Mutex
	var prompts [][]uint32
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 99))
			for i := range perClient {
				d := docs[rng.IntN(len(docs))]
				cut := rng.IntN(len(d)/e2eBlock+1) * e2eBlock
				p := append(append([]uint32(nil), d[:cut]...), span(rng.Uint32N(1<<30), 1+rng.IntN(3*e2eBlock))...)
				res, err := svc.SelectAndReserve(&core.SelectRequest{Prompt: core.Prompt{TokenIDs: p}})
				if err != nil {
					t.Error(err)
					return
				}
				m := mocks[res.WorkerID-1]
				maxTokens := 1 + rng.IntN(20)
				if rng.IntN(50) == 0 {
					_ = m.w.DropLive(0, 1+rng.IntN(3))
				}
				if c == 0 && i == perClient/2 {
					if err := mocks[0].w.Restart(); err != nil {
						t.Error(err)
					}
				}
				_, err = m.w.Serve(context.Background(), mockworker.Request{PromptTokenIDs: p, MaxTokens: &maxTokens})
				_ = svc.Free(*res.SelectionID)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				prompts = append(prompts, p)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// One more batch per worker so that any trailing dropped batch shows up as a gap.
	for i, m := range mocks {
		poll.True(t, poll.Generous, "re-subscribed", func() bool { return m.w.Subscribed(0) })
		_, _ = m.w.Serve(context.Background(), mockworker.Request{PromptTokenIDs: span(uint32(i)*7+1, e2eBlock)})
	}
	poll.True(t, poll.Generous, "listeners to catch up", func() bool {
		for i, m := range mocks {
			next := m.w.Stats()[0].Publisher.NextSeq
			for _, r := range svc.Workers("", "") {
				if l := r.Listeners["0"]; r.WorkerID == uint64(i+1) && (l.Watermark == nil || *l.Watermark+1 != next) {
					return false
				}
			}
		}
		return true
	})
	for i, m := range mocks {
		t.Logf("worker %d: %+v", i+1, m.w.Stats()[0])
		for j, p := range append(prompts, docs...) {
			want, _ := m.w.CachedBlocks(0, p)
			if got := deviceBlocks(t, svc, p, uint64(i+1), 0); got != uint64(want) {
				t.Fatalf("prompt %d on worker %d: kvselect overlap %d, mock caches %d", j, i+1, got, want)
			}
		}
	}
}
