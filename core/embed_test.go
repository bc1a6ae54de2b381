package core_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
)

// fixedClock is a deterministic clock for parity tests.
func fixedClock() func() time.Time {
	t := time.Unix(1_700_000_000, 0)
	return func() time.Time { return t }
}

func newEmbedded(t *testing.T, sc core.Scoring) *core.Service {
	t.Helper()
	return newEmbeddedWith(t, core.Config{Scoring: sc})
}

// newEmbeddedWith builds the parity service from base (its Engine, Seed and Clock are set
// here) with opts, and registers four workers.
func newEmbeddedWith(t *testing.T, base core.Config, opts ...core.Option) *core.Service {
	t.Helper()
	cfg := engine.KVSelectDefaults()
	cfg.UseKVEvents = false
	base.Engine, base.Seed, base.Clock = cfg, 7, fixedClock()
	svc, err := core.New(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	for id := uint64(1); id <= 4; id++ {
		spec := core.WorkerSpec{WorkerID: ptr(id), Endpoint: ptr(fmt.Sprint("http://w", id)), BlockSize: ptr(uint32(4)),
			TopologyDomains: map[string]string{"zone": []string{"a", "b"}[id%2]}}
		if _, err := svc.UpsertWorker(spec); err != nil {
			t.Fatal(err)
		}
	}
	return svc
}

// requests is a fixed workload: prompts sharing prefixes, some booked, some freed.
func requests(n int) []core.SelectRequest {
	rng := rand.New(rand.NewPCG(3, 3))
	out := make([]core.SelectRequest, n)
	for i := range out {
		tokens := make([]uint32, 4*(1+rng.IntN(12)))
		base := uint32(rng.IntN(5)) * 1000
		for j := range tokens {
			tokens[j] = base + uint32(j)
		}
		out[i] = core.SelectRequest{SelectionID: ptr(fmt.Sprint("r", i)), Prompt: core.Prompt{TokenIDs: tokens},
			SessionContext: &core.SessionContext{SessionID: ptr("s"), AgentHeaders: map[string][]string{"x-zone": {"a"}}}}
	}
	return out
}

// TestEmbeddedMatchesHTTP drives the same workload through the Go API and through the HTTP
// service; with the default scoring the decisions are identical, one by one.
func TestEmbeddedMatchesHTTP(t *testing.T) {
	embedded := newEmbedded(t, core.Scoring{})
	served := newEmbedded(t, core.Scoring{})
	srv := httptest.NewServer(api.New(served, api.Options{}))
	defer srv.Close()
	for i, req := range requests(300) {
		got, err := embedded.SelectAndReserve(&req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := json.Marshal(req)
		resp, err := http.Post(srv.URL+"/select_and_reserve", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var viaHTTP core.SelectResponse
		err = json.NewDecoder(resp.Body).Decode(&viaHTTP)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d over HTTP: status %d, %v", i, resp.StatusCode, err)
		}
		if got.WorkerID != viaHTTP.WorkerID || got.DPRank != viaHTTP.DPRank || got.EffectivePrefillTokens != viaHTTP.EffectivePrefillTokens {
			t.Fatalf("request %d: embedded chose %d/%d (%d prefill), HTTP chose %d/%d (%d prefill)", i,
				got.WorkerID, got.DPRank, got.EffectivePrefillTokens, viaHTTP.WorkerID, viaHTTP.DPRank, viaHTTP.EffectivePrefillTokens)
		}
		if i%3 == 0 {
			if err := embedded.Free(*req.SelectionID); err != nil {
				t.Fatal(err)
			}
			r, _ := http.NewRequest(http.MethodDelete, srv.URL+"/reservations/"+*req.SelectionID, nil)
			if resp, err := http.DefaultClient.Do(r); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("free over HTTP: %v %v", resp, err)
			} else {
				resp.Body.Close()
			}
		}
	}
}

// TestCustomScorerChangesDecisions: a strong same-zone scorer sends every request to zone "a"
// (workers 2 and 4), which the default scoring does not.
func TestCustomScorerChangesDecisions(t *testing.T) {
	zone := core.ScorerFunc(func(ctx *core.SelectionContext, c *core.Candidate) float64 {
		if z := ctx.AgentHeaders["x-zone"]; len(z) > 0 && c.Worker.TopologyDomains["zone"] == z[0] {
			return -1
		}
		return 0
	})
	plain := newEmbedded(t, core.Scoring{})
	zoned := newEmbedded(t, core.Scoring{Scorers: []core.WeightedScorer{{Name: "zone", Weight: 1e9, Scorer: zone}}})
	differ := 0
	for i, req := range requests(200) {
		a, err := plain.SelectAndReserve(&req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := zoned.SelectAndReserve(&req)
		if err != nil {
			t.Fatal(err)
		}
		if b.WorkerID%2 != 0 {
			t.Fatalf("request %d: zone scorer chose worker %d outside zone a", i, b.WorkerID)
		}
		if a.WorkerID != b.WorkerID {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("the custom scorer never changed a decision")
	}
}

// TestEmbeddedWithNATS: two embedded services replicate bookings over a real nats-server.
func TestEmbeddedWithNATS(t *testing.T) {
	srv := natstest.RunServer(t)
	mk := func(id, peer string) *core.Service {
		nc, err := bus.Connect(bus.ConnConfig{URLs: srv.ClientURL(), Name: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close) // after the service's Close (cleanups run last-in first-out)
		return newEmbeddedWith(t, core.Config{ReplicaID: id, Replication: core.ReplicationConfig{Bus: bus.Config{Cluster: "embed", Peers: []string{peer}}}},
			core.WithTransport(bus.NewNATSTransport(nc)))
	}
	a, b := mk("a", "b"), mk("b", "a")
	natstest.WaitInterestCount(t, srv, "kvselect.v1.embed.lifecycle", 2)
	req := requests(1)[0]
	resp, err := a.SelectAndReserve(&req)
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, natstest.ReadyTimeout, func() error {
		for _, pl := range b.Loads("", "") {
			for _, l := range pl.Loads {
				if l.WorkerID == resp.WorkerID && l.ActiveRequests == 1 {
					return nil
				}
			}
		}
		return fmt.Errorf("peer has not mirrored the booking: %+v", b.Loads("", ""))
	})
	if err := b.Free(*req.SelectionID); err != nil { // a peer-booked id can be freed on any replica
		t.Fatal(err)
	}
	natstest.WaitFor(t, natstest.ReadyTimeout, func() error {
		if n := a.Loads("", "")[0].Loads; sumRequests(n) != 0 {
			return fmt.Errorf("free has not propagated back: %+v", n)
		}
		return nil
	})
}

func sumRequests(ls []core.PotentialLoad) (n uint64) {
	for _, l := range ls {
		n += l.ActiveRequests
	}
	return n
}
