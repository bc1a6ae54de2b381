package mockworker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/integration/mockworker"
	"github.com/kvselect/kvselect/internal/poll"
)

// The end-to-end tests run kvselect's core.Service with KV events on against mock workers on
// real loopback sockets: prompts go to a mock worker over HTTP, the worker publishes vLLM
// events over ZeroMQ, kvselect's listeners ingest them, and the service's OverlapScores and
// Select must reflect the worker's cache — including evictions, resets and restarts.

const e2eBlock = 16

func e2eLogger() *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// mock is one mock worker with its HTTP server.
type mock struct {
	w   *mockworker.Worker
	url string
}

func startMock(t *testing.T, cfg mockworker.Config) *mock {
	t.Helper()
	cfg.Logger = e2eLogger()
	w, err := mockworker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); _ = w.Close() })
	return &mock{w: w, url: "http://" + ln.Addr().String()}
}

// complete posts a completion to the mock and returns its result.
func (m *mock) complete(t *testing.T, prompt []uint32, dpRank *int) mockworker.Result {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt_token_ids": prompt, "max_tokens": 4, "dp_rank": dpRank})
	resp, err := http.Post(m.url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("completion: %d %s", resp.StatusCode, b)
	}
	var r mockworker.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func startService(t *testing.T) *core.Service {
	t.Helper()
	svc, err := core.New(core.Config{Engine: engine.DefaultConfig(), Logger: e2eLogger(), Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	svc.EnableKVEvents()
	svc.OpenGate()
	t.Cleanup(func() { _ = svc.Close() })
	return svc
}

// register adds m to svc as worker id over the Go API, with its PUB endpoints per rank and
// (single rank only, as the API allows) its replay endpoint, and waits until every rank's
// PUB has kvselect's subscription.
func register(t *testing.T, svc *core.Service, id uint64, m *mock) {
	t.Helper()
	cfg := m.w.Config()
	bs, size, start := uint32(cfg.BlockSize), uint32(cfg.DPSize), uint32(cfg.DPStartRank)
	spec := core.WorkerSpec{WorkerID: &id, Endpoint: &m.url, BlockSize: &bs, DataParallelSize: &size, DataParallelStartRank: &start}
	eps := m.w.Endpoints()
	if size == 1 {
		spec.KVEventsEndpoint = &eps[0]
		if rep := m.w.ReplayEndpoints()[0]; rep != "" {
			spec.ReplayEndpoint = &rep
		}
	} else {
		spec.KVEventsEndpoints = map[string]string{}
		for i, ep := range eps {
			spec.KVEventsEndpoints[fmt.Sprint(int(start)+i)] = ep
		}
	}
	rec, err := svc.UpsertWorker(spec)
	if err != nil || rec.Lifecycle != engine.LifecycleSchedulable {
		t.Fatalf("register worker %d: %+v %v", id, rec, err)
	}
	for i := range eps {
		poll.True(t, poll.Generous, fmt.Sprintf("worker %d rank %d subscribed", id, int(start)+i), func() bool { return m.w.Subscribed(int(start) + i) })
	}
}

// deviceBlocks returns kvselect's device overlap of prompt on (worker, rank).
func deviceBlocks(t *testing.T, svc *core.Service, prompt []uint32, worker uint64, rank uint32) uint64 {
	t.Helper()
	sc, err := svc.OverlapScores(&core.PromptQuery{Prompt: core.Prompt{TokenIDs: prompt}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sc.Workers {
		if r.WorkerID == worker && r.DPRank == rank {
			return r.DeviceBlocks
		}
	}
	return 0
}

// waitOverlap polls until kvselect's overlap of prompt on every listed (worker, rank) equals
// the wanted block count.
func waitOverlap(t *testing.T, svc *core.Service, what string, prompt []uint32, want map[[2]uint64]uint64) {
	t.Helper()
	poll.True(t, poll.Generous, what, func() bool {
		for k, n := range want {
			if deviceBlocks(t, svc, prompt, k[0], uint32(k[1])) != n {
				return false
			}
		}
		return true
	})
}

func span(base uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = base + uint32(i)
	}
	return out
}

func selectWorker(t *testing.T, svc *core.Service, prompt []uint32) (uint64, uint32) {
	t.Helper()
	res, err := svc.Select(&core.SelectRequest{Prompt: core.Prompt{TokenIDs: prompt}})
	if err != nil {
		t.Fatal(err)
	}
	return res.WorkerID, res.DPRank
}

// TestEndToEndOverlapAndEviction: kvselect sees a prompt cached on the mock that served it,
// routes the prompt there, and forgets it once the mock evicts it or resets.
func TestEndToEndOverlapAndEviction(t *testing.T) {
	svc := startService(t)
	cfg := mockworker.Config{BlockSize: e2eBlock, NumGPUBlocks: 12, Speedup: 1000, ReplayEndpoint: "tcp://127.0.0.1:0"}
	a, b := startMock(t, cfg), startMock(t, cfg)
	register(t, svc, 1, a)
	register(t, svc, 2, b)

	p := span(1000, 6*e2eBlock+4) // 6 full blocks
	q := span(5000, 5*e2eBlock)
	if r := a.complete(t, p, nil); r.CachedTokens != 0 {
		t.Fatalf("cold prompt reported %d cached tokens", r.CachedTokens)
	}
	b.complete(t, q, nil)
	waitOverlap(t, svc, "p on worker 1 only", p, map[[2]uint64]uint64{{1, 0}: 6, {2, 0}: 0})
	waitOverlap(t, svc, "q on worker 2 only", q, map[[2]uint64]uint64{{1, 0}: 0, {2, 0}: 5})
	if w, _ := selectWorker(t, svc, p); w != 1 {
		t.Fatalf("select(p) = worker %d, want 1", w)
	}
	if w, _ := selectWorker(t, svc, q); w != 2 {
		t.Fatalf("select(q) = worker %d, want 2", w)
	}
	// A prompt sharing p's first 3 blocks overlaps 3 blocks on worker 1.
	px := append(span(1000, 3*e2eBlock), span(70000, 3*e2eBlock)...)
	waitOverlap(t, svc, "shared prefix", px, map[[2]uint64]uint64{{1, 0}: 3})

	// Fill worker 1 (capacity 12): after r1 the cache is full; r2 evicts p's blocks.
	a.complete(t, span(20000, 6*e2eBlock), nil)
	a.complete(t, span(30000, 6*e2eBlock), nil)
	if n, _ := a.w.CachedBlocks(0, p); n != 0 {
		t.Fatalf("mock still caches %d blocks of p", n)
	}
	waitOverlap(t, svc, "p evicted", p, map[[2]uint64]uint64{{1, 0}: 0})
	waitOverlap(t, svc, "latest prompt indexed", span(30000, 6*e2eBlock), map[[2]uint64]uint64{{1, 0}: 6})

	// AllBlocksCleared empties worker 2 in kvselect's index.
	if err := b.w.Reset(); err != nil {
		t.Fatal(err)
	}
	waitOverlap(t, svc, "q cleared", q, map[[2]uint64]uint64{{2, 0}: 0})
}

// TestEndToEndRestartDropsStaleBlocks: a restarted mock announces nothing about its lost
// cache; kvselect's listener recognises the new incarnation by its sequence restarting and
// drops the worker's stale blocks.
func TestEndToEndRestartDropsStaleBlocks(t *testing.T) {
	svc := startService(t)
	a := startMock(t, mockworker.Config{BlockSize: e2eBlock, NumGPUBlocks: 64, Speedup: 1000, ReplayEndpoint: "tcp://127.0.0.1:0"})
	register(t, svc, 1, a)
	p := span(1, 4*e2eBlock)
	a.complete(t, p, nil)
	a.complete(t, span(900, 2*e2eBlock), nil)
	waitOverlap(t, svc, "p indexed", p, map[[2]uint64]uint64{{1, 0}: 4})

	if err := a.w.Restart(); err != nil {
		t.Fatal(err)
	}
	poll.True(t, poll.Generous, "re-subscribed", func() bool { return a.w.Subscribed(0) })
	q := span(50000, 2*e2eBlock)
	a.complete(t, q, nil)
	waitOverlap(t, svc, "new incarnation indexed", q, map[[2]uint64]uint64{{1, 0}: 2})
	if n := deviceBlocks(t, svc, p, 1, 0); n != 0 {
		t.Fatalf("kvselect still credits worker 1 with %d stale blocks of p", n)
	}
}

// TestEndToEndDataParallel: a two-rank mock registered with per-rank endpoints; a prompt
// served on global rank 5 is indexed on (worker, 5) only, and selection names that rank.
func TestEndToEndDataParallel(t *testing.T) {
	svc := startService(t)
	m := startMock(t, mockworker.Config{BlockSize: e2eBlock, NumGPUBlocks: 64, Speedup: 1000, DPSize: 2, DPStartRank: 4})
	register(t, svc, 9, m)
	p := span(400, 3*e2eBlock)
	five := 5
	if r := m.complete(t, p, &five); r.DPRank != 5 {
		t.Fatalf("served on rank %d", r.DPRank)
	}
	waitOverlap(t, svc, "p on rank 5 only", p, map[[2]uint64]uint64{{9, 4}: 0, {9, 5}: 3})
	if w, r := selectWorker(t, svc, p); w != 9 || r != 5 {
		t.Fatalf("select(p) = worker %d rank %d, want 9/5", w, r)
	}
}

// TestEndToEndIndexMatchesCaches routes a seeded random workload (prompts that share
// prefixes of a few dozen "documents", on small caches so evictions are constant) through
// kvselect's Select to two mock workers, waits until kvselect's listeners have applied every
// published batch, and then requires kvselect's device overlap of every prompt on every
// worker to equal the number of leading blocks the mock actually caches.
func TestEndToEndIndexMatchesCaches(t *testing.T) {
	svc := startService(t)
	clk := mockworker.NewInstantClock(time.Unix(1_700_000_000, 0))
	mocks := []*mock{}
	for i := range 2 {
		m := startMock(t, mockworker.Config{BlockSize: e2eBlock, NumGPUBlocks: 40, Clock: clk, ReplayEndpoint: "tcp://127.0.0.1:0"})
		register(t, svc, uint64(i+1), m)
		mocks = append(mocks, m)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	docs := make([][]uint32, 24)
	for i := range docs {
		docs[i] = span(uint32(i+1)*100000, (1+rng.IntN(8))*e2eBlock)
	}
	var prompts [][]uint32
	for range 300 {
		d := docs[rng.IntN(len(docs))]
		cut := rng.IntN(len(d)/e2eBlock+1) * e2eBlock
		p := append(append([]uint32(nil), d[:cut]...), span(rng.Uint32N(1<<30), rng.IntN(4*e2eBlock)+1)...)
		prompts = append(prompts, p)
		id, _ := selectWorker(t, svc, p)
		if _, err := mocks[id-1].w.Serve(context.Background(), mockworker.Request{PromptTokenIDs: p}); err != nil {
			t.Fatal(err)
		}
	}
	poll.True(t, poll.Generous, "listeners caught up", func() bool {
		for i, m := range mocks {
			next := m.w.Stats()[0].Publisher.NextSeq
			recs := svc.Workers("", "")
			for _, r := range recs {
				if r.WorkerID != uint64(i+1) {
					continue
				}
				l, ok := r.Listeners["0"]
				if !ok || l.Watermark == nil || *l.Watermark+1 != next {
					return false
				}
			}
		}
		return true
	})
	var served, evicted uint64
	for i, m := range mocks {
		st := m.w.Stats()[0]
		served, evicted = served+st.Requests, evicted+st.EvictedBlocks
		t.Logf("worker %d: %+v", i+1, st)
		for j, p := range append(prompts, docs...) {
			want, _ := m.w.CachedBlocks(0, p)
			if got := deviceBlocks(t, svc, p, uint64(i+1), 0); got != uint64(want) {
				t.Fatalf("prompt %d on worker %d: kvselect overlap %d, mock caches %d", j, i+1, got, want)
			}
		}
	}
	if served != 300 || evicted == 0 {
		t.Fatalf("workload served %d requests with %d evictions; the test needs both", served, evicted)
	}
}
