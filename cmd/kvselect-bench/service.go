package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
	"github.com/kvselect/kvselect/integration/sim"
	"github.com/kvselect/kvselect/kvwire"
)

// inproc is a kvselect service started in this process on a loopback port.
type inproc struct {
	url     string
	entries int
	srv     *http.Server
	svc     *core.Service
}

// startService registers n workers (block size 512, the trace's unit) and preloads the index:
// every trace request's prefix chain is stored on `replicas` random owners, through the same
// KV-event path the ZMQ listeners use.
func startService(reqs []sim.Request, n, replicas int) (*inproc, error) {
	svc, err := core.NewLocal(engine.DefaultConfig(), 1)
	if err != nil {
		return nil, err
	}
	bs := uint32(sim.TraceBlockTokens)
	for w := 1; w <= n; w++ {
		id := uint64(w)
		ep := "http://bench-worker-" + strconv.Itoa(w)
		kv := "tcp://127.0.0.1:1"
		if _, err := svc.UpsertWorker(engine.WorkerSpec{WorkerID: &id, Endpoint: &ep, BlockSize: &bs, KVEventsEndpoint: &kv}); err != nil {
			return nil, err
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	ev := make([]engine.KVEvent, 1)
	for _, r := range reqs {
		for range replicas {
			o := kvwire.Owner{Worker: uint64(rng.IntN(n) + 1)}
			ev[0] = engine.KVEvent{Kind: engine.KVStored, BlockHashes: r.Blocks, LocalHashes: r.Blocks, BlockSize: int(bs)}
			svc.ApplyKVEvents(o, ev)
		}
	}
	entries := 0
	for _, p := range svc.Stats().Partitions {
		entries += p.IndexEntries
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &inproc{url: "http://" + ln.Addr().String(), entries: entries, svc: svc,
		srv: &http.Server{Handler: api.New(svc, api.Options{})}}
	go func() { _ = s.srv.Serve(ln) }()
	if entries < 1_000_000 {
		fmt.Printf("note: only %d indexed entries (raise --replicas for ≥ 1M)\n", entries)
	}
	return s, nil
}

func (s *inproc) close() { _ = s.srv.Close(); _ = s.svc.Close() }

// ceiling is a trivial Go JSON service with the same routes the EPP flow calls: it decodes the
// selection body with encoding/json and answers small fixed responses, doing no selection work.
type ceiling struct {
	url string
	srv *http.Server
}

func startCeiling() (*ceiling, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /select_and_reserve", func(w http.ResponseWriter, r *http.Request) {
		var req engine.SelectRequest
		if err := decodeBody(r, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeSmall(w, `{"selection_id":"x","worker_id":1,"dp_rank":0,"endpoint":"http://w"}`)
	})
	ok := func(w http.ResponseWriter, _ *http.Request) { writeSmall(w, `{"status":"ok"}`) }
	mux.HandleFunc("POST /reservations/{id}/prefill_complete", ok)
	mux.HandleFunc("DELETE /reservations/{id}", ok)
	c := &ceiling{url: "http://" + ln.Addr().String(), srv: &http.Server{Handler: mux}}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

func (c *ceiling) close() { _ = c.srv.Close() }
