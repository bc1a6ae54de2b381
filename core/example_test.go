package core_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

func ptr[T any](v T) *T { return &v }

// A local service: register a worker, select and book a request, report its lifecycle.
func Example() {
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false // index from bookings; no ZMQ endpoints needed
	svc, err := core.NewLocal(cfg, 1)
	if err != nil {
		panic(err)
	}
	defer svc.Close()

	if _, err := svc.UpsertWorker(core.WorkerSpec{WorkerID: ptr(uint64(1)), Endpoint: ptr("http://worker-1:8000"), BlockSize: ptr(uint32(4))}); err != nil {
		panic(err)
	}
	req := &core.SelectRequest{SelectionID: ptr("req-1"), Prompt: core.Prompt{TokenIDs: []uint32{1, 2, 3, 4, 5, 6, 7, 8}}}
	resp, err := svc.SelectAndReserve(req)
	if err != nil {
		panic(err)
	}
	fmt.Println("worker", resp.WorkerID, "endpoint", resp.Endpoint, "prefill tokens", resp.EffectivePrefillTokens)

	_ = svc.PrefillComplete("req-1")
	_ = svc.Free("req-1")
	l := svc.Loads("", "")[0].Loads[0]
	fmt.Println("after free:", l.ActiveRequests, "requests,", l.PotentialDecodeBlocks, "blocks")
	// Output:
	// worker 1 endpoint http://worker-1:8000 prefill tokens 8
	// after free: 0 requests, 0 blocks
}

// A custom scorer: prefer workers in the caller's zone, named in session_context.agent_headers.
func ExampleScorerFunc() {
	sameZone := core.ScorerFunc(func(ctx *core.SelectionContext, c *core.Candidate) float64 {
		if z := ctx.AgentHeaders["x-zone"]; len(z) > 0 && c.Worker.TopologyDomains["zone"] == z[0] {
			return -1
		}
		return 0
	})
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	svc, err := core.New(core.Config{Engine: cfg, Seed: 1, Scoring: core.Scoring{
		Scorers: []core.WeightedScorer{{Name: "same-zone", Weight: 100, Scorer: sameZone}},
	}})
	if err != nil {
		panic(err)
	}
	defer svc.Close()
	for id, zone := range map[uint64]string{1: "us-east", 2: "us-west"} {
		_, _ = svc.UpsertWorker(core.WorkerSpec{WorkerID: ptr(id), Endpoint: ptr(fmt.Sprint("http://w", id)), BlockSize: ptr(uint32(4)),
			TopologyDomains: map[string]string{"zone": zone}})
	}
	req := &core.SelectRequest{
		Prompt:         core.Prompt{TokenIDs: []uint32{1, 2, 3, 4}},
		SessionContext: &core.SessionContext{SessionID: ptr("s"), AgentHeaders: map[string][]string{"x-zone": {"us-west"}}},
	}
	resp, _ := svc.Select(req)
	fmt.Println("chose worker", resp.WorkerID)
	// Output: chose worker 2
}

// A service's whole life: configuration from the environment, the startup order and the
// shutdown in Run.
func ExampleService_Run() {
	cfg, err := core.ConfigFromEnv(func(string) (string, bool) { return "", false }, nil) // os.LookupEnv in production
	if err != nil {
		panic(err)
	}
	cfg.Engine.UseKVEvents = false
	cfg.SweepInterval = time.Minute
	svc, err := core.New(cfg) // add core.WithTransport(...) to replicate
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	<-svc.Started()
	_, _ = svc.UpsertWorker(core.WorkerSpec{WorkerID: ptr(uint64(1)), Endpoint: ptr("http://worker-1:8000"), BlockSize: ptr(uint32(4))})
	fmt.Println("ready:", svc.Ready().Ready)
	stop() // SIGTERM in a binary
	fmt.Println("run:", <-done, "shutting down:", svc.IsShuttingDown())
	// Output:
	// ready: true
	// run: <nil> shutting down: true
}
