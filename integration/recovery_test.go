package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/integration/mockworker"
	"github.com/kvselect/kvselect/internal/poll"
)

// TestRecoveryFromLiveReplica is issue 5's end-to-end scenario with real processes and real
// ZMQ events: replica A ingests KV events from a simulated vLLM worker; replica B starts later
// and recovers A's index over NATS; replica C recovers it over HTTP from A's /dump. B and C then
// answer /overlap_scores exactly as A does, although they never received the worker's events
// (the mock is idle by then and they have no replay endpoint to ask).
func TestRecoveryFromLiveReplica(t *testing.T) {
	needBinaries(t)
	w, err := mockworker.New(mockworker.Config{
		BlockSize: 16, NumGPUBlocks: 4096, KVEventsEndpoint: "tcp://127.0.0.1:0",
		Clock: mockworker.NewInstantClock(time.Unix(0, 0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	worker := map[string]any{"worker_id": 1, "endpoint": "http://mock:8000", "block_size": 16,
		"kv_events_endpoint": w.Endpoints()[0]}

	natsPort := freePort(t)
	a := startKVReplica(t, "a", "--nats-listen", "127.0.0.1:"+strconv.Itoa(natsPort))
	a.must(t, http.StatusCreated, "POST", "/workers", worker, nil)
	waitFor(t, syncTimeout, func() error {
		var recs []core.WorkerRecord
		if _, err := a.call("GET", "/workers", nil, &recs); err != nil {
			return err
		}
		if len(recs) != 1 || recs[0].Listeners["0"].Status != "active" {
			return fmt.Errorf("listener not active yet: %+v", recs)
		}
		return nil
	})

	// ZeroMQ's slow joiner: "active" means A's SUB is connected, not that the mock's PUB has its
	// subscription yet, and the mock has no replay endpoint, so a batch published in between is
	// lost for good. Serve fresh one-block canary prompts until one reaches A's index.
	var canaries [][]uint32
	waitFor(t, syncTimeout, func() error {
		c := make([]uint32, 16)
		for j := range c {
			c[j] = uint32(900_000 + 16*len(canaries) + j)
		}
		canaries = append(canaries, c)
		one := 1
		if _, err := w.Serve(context.Background(), mockworker.Request{PromptTokenIDs: c, MaxTokens: &one}); err != nil {
			return fmt.Errorf("%w: %v", poll.ErrStop, err)
		}
		for _, c := range canaries {
			if deviceBlocks(t, a, c) == 1 {
				return nil
			}
		}
		return fmt.Errorf("none of %d canary prompts reached A's index yet", len(canaries))
	})

	// Three conversations sharing a system prompt, served by the mock: it publishes the blocks.
	prompts := make([][]uint32, 3)
	for i := range prompts {
		p := make([]uint32, 0, 96)
		for j := range 32 {
			p = append(p, uint32(j)) // shared prefix: 2 blocks
		}
		for j := range 32 + 16*i {
			p = append(p, uint32(1000*(i+1)+j))
		}
		prompts[i] = p
		max := 1
		if _, err := w.Serve(context.Background(), mockworker.Request{PromptTokenIDs: p, MaxTokens: &max}); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]int, len(prompts))
	waitFor(t, syncTimeout, func() error {
		for i, p := range prompts {
			want[i] = deviceBlocks(t, a, p)
			if want[i] != len(p)/16 {
				return fmt.Errorf("A sees %d cached blocks of prompt %d, want %d", want[i], i, len(p)/16)
			}
		}
		return nil
	})

	// B recovers over NATS (it connects to A's embedded server; no HTTP peers configured).
	b := startKVReplica(t, "b", "--nats-url", "nats://127.0.0.1:"+strconv.Itoa(natsPort))
	// C recovers over HTTP from A's /dump (it runs its own private NATS).
	c := startKVReplica(t, "c", "--indexer-peers", a.base)
	for _, tc := range []struct {
		r      *replica
		source string
	}{{b, "nats"}, {c, "http"}} {
		waitFor(t, syncTimeout, func() error {
			rd, err := readiness(tc.r)
			if err != nil {
				return err
			}
			if rd.Recovery == nil || rd.Recovery.State != "done" {
				return fmt.Errorf("%s recovery not done: %+v", tc.r.id, rd.Recovery)
			}
			if rd.Recovery.Source != tc.source || rd.Recovery.Blocks == 0 {
				return fmt.Errorf("%s recovered from %q with %d blocks, want %s: %+v", tc.r.id, rd.Recovery.Source, rd.Recovery.Blocks, tc.source, rd.Recovery)
			}
			return nil
		})
		tc.r.must(t, http.StatusCreated, "POST", "/workers", worker, nil)
		var got []int
		for _, p := range prompts {
			got = append(got, deviceBlocks(t, tc.r, p))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s (recovered over %s) sees cached blocks %v, A sees %v", tc.r.id, tc.source, got, want)
		}
	}
}

// startKVReplica starts kvselect with KV events on (the default), HTTP on a random loopback
// port and extra flags, and waits until its HTTP API answers.
func startKVReplica(t *testing.T, id string, extra ...string) *replica {
	t.Helper()
	r := &replica{id: id, port: freePort(t)}
	r.args = append([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(r.port), "--replica-id", id,
		"--cluster", "recovery-it"}, extra...)
	r.base = "http://127.0.0.1:" + strconv.Itoa(r.port)
	r.p = startProc(t, "kvselect:"+id, kvselectBin, nil, r.args...)
	waitFor(t, syncTimeout, func() error {
		if done, err := r.p.exited(); done {
			return fmt.Errorf("%w: %s exited: %v", poll.ErrStop, id, err)
		}
		_, err := r.call("GET", "/health", nil, nil)
		return err
	})
	return r
}

// readiness returns GET /ready's body whatever its status (503 carries the same shape).
func readiness(r *replica) (core.Readiness, error) {
	var rd core.Readiness
	resp, err := httpClient.Get(r.base + "/ready")
	if err != nil {
		return rd, err
	}
	defer resp.Body.Close()
	return rd, json.NewDecoder(resp.Body).Decode(&rd)
}

// deviceBlocks returns worker 1's device-tier overlap with prompt on r.
func deviceBlocks(t *testing.T, r *replica, prompt []uint32) int {
	t.Helper()
	var res core.OverlapScores
	r.must(t, http.StatusOK, "POST", "/overlap_scores", map[string]any{"token_ids": prompt}, &res)
	for _, row := range res.Workers {
		if row.WorkerID == 1 && row.DPRank == 0 {
			return int(row.DeviceBlocks)
		}
	}
	t.Fatalf("%s: no overlap row for worker 1: %+v", r.id, res)
	return 0
}
