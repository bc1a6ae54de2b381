package core_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core"
)

// Two replicas of one cluster, joined by core.WithTransport over the in-memory bus (in
// production, bus.NewNATSTransport over bus.Connect's connection): a booking made on one is
// mirrored into the other's load accounting, and freed from either.
func ExampleWithTransport() {
	net := bus.NewMemNetwork()
	replica := func(id, peer string) *core.Service {
		cfg := core.DefaultConfig()
		cfg.Engine.UseKVEvents = false // index from bookings; no ZMQ endpoints needed
		cfg.ReplicaID = id
		cfg.Replication.Bus = bus.Config{Cluster: "example", Peers: []string{peer}}
		svc, err := core.New(cfg, core.WithTransport(net.Connect()))
		if err != nil {
			panic(err)
		}
		// The worker catalog is local to each replica: register it on every one.
		if _, err := svc.UpsertWorker(core.WorkerSpec{WorkerID: ptr(uint64(1)), Endpoint: ptr("http://worker-1:8000"), BlockSize: ptr(uint32(4))}); err != nil {
			panic(err)
		}
		return svc
	}
	a, b := replica("a", "b"), replica("b", "a")
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- a.Run(ctx) }()
	go func() { done <- b.Run(ctx) }()
	<-a.Started()
	<-b.Started()

	req := &core.SelectRequest{SelectionID: ptr("req-1"), Prompt: core.Prompt{TokenIDs: []uint32{1, 2, 3, 4, 5, 6, 7, 8}}}
	if _, err := a.SelectAndReserve(req); err != nil {
		panic(err)
	}
	// Replication is asynchronous (fire and forget, as in Dynamo): wait for the peer.
	activeOn := func(s *core.Service) uint64 {
		var n uint64
		for _, pl := range s.Loads("", "") {
			for _, l := range pl.Loads {
				n += l.ActiveRequests
			}
		}
		return n
	}
	waitFor := func(s *core.Service, want uint64) {
		for deadline := time.Now().Add(30 * time.Second); activeOn(s) != want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				panic(fmt.Sprintf("replica still has %d active requests, want %d", activeOn(s), want))
			}
		}
	}
	waitFor(b, 1)
	fmt.Println("b mirrors a's booking:", activeOn(b), "active request")

	if err := b.Free("req-1"); err != nil { // a peer's booking can be freed on any replica
		panic(err)
	}
	waitFor(a, 0)
	fmt.Println("after the free on b, a has", activeOn(a), "active requests")

	stop()
	fmt.Println("run:", <-done, <-done)
	// Output:
	// b mirrors a's booking: 1 active request
	// after the free on b, a has 0 active requests
	// run: <nil> <nil>
}
