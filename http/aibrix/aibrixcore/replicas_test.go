package aibrixcore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/aibrix"
	"github.com/kvselect/kvselect/internal/poll"
)

// Two Services on a real nats-server, each serving the AIBrix decision handler (in process)
// over its replicated session table: a binding made through one replica's handler is honoured
// by the other's, a move made on the second reaches the first, and a replica without a table
// drops target bindings while lifecycle replication goes on.

// replica is one Service joined to the bus with workers 1 and 2 (two ranks each) registered.
type replica struct {
	id  string
	svc *core.Service
	br  *core.BusReplicator
}

func ptr[T any](v T) *T { return &v }

// startReplica builds a Service with KV events off, connects it to url and enables replication
// with peers.
func startReplica(t *testing.T, url, id string, peers ...string) *replica {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	nc, err := bus.Connect(bus.ConnConfig{Name: id, URLs: url, NoEcho: true, ReconnectWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rc := core.ReplicationConfig{Bus: bus.Config{Cluster: "aibrix", Peers: peers, HeartbeatInterval: 100 * time.Millisecond}}
	svc, err := core.New(core.Config{Engine: cfg, ReplicaID: id, Seed: uint64(len(id)) + 1, Replication: rc},
		core.WithTransport(bus.NewNATSTransport(nc)))
	if err != nil {
		t.Fatal(err)
	}
	br := svc.Replication()
	svc.Start()
	t.Cleanup(func() {
		_ = svc.Close() // and its replicator
		nc.Close()
	})
	for _, w := range []uint64{1, 2} {
		spec := core.WorkerSpec{WorkerID: ptr(w), Endpoint: ptr(fmt.Sprintf("http://w%d:8000", w)),
			BlockSize: ptr(uint32(4)), DataParallelSize: ptr(uint32(2))}
		if _, err := svc.UpsertWorker(spec); err != nil {
			t.Fatal(err)
		}
	}
	return &replica{id: id, svc: svc, br: br}
}

// book admits one request with a distinct prompt on r.
func book(t *testing.T, r *replica, id string, n int) {
	t.Helper()
	toks := make([]uint32, 16)
	for i := range toks {
		toks[i] = uint32(n*131 + i)
	}
	if _, err := r.svc.SelectAndReserve(&core.SelectRequest{SelectionID: ptr(id), Prompt: core.Prompt{TokenIDs: toks}}); err != nil {
		t.Fatalf("book %s on %s: %v", id, r.id, err)
	}
}

// waitSameLoads polls until every replica reports the same /loads as want.
func waitSameLoads(t *testing.T, want *replica, others ...*replica) {
	t.Helper()
	natstest.WaitFor(t, poll.Generous, func() error {
		w := want.svc.Loads("", "")
		for _, o := range others {
			if got := o.svc.Loads("", ""); !reflect.DeepEqual(got, w) {
				return fmt.Errorf("%s loads %+v, %s has %+v", o.id, got, want.id, w)
			}
		}
		return nil
	})
}

// aibrixReplica is a replica with its AIBrix handler and session table.
type aibrixReplica struct {
	*replica
	sessions *core.AIBrixSessions
	h        http.Handler
}

// startAIBrixReplica starts a replica whose AIBrix policy keys sessions on "sessionId".
func startAIBrixReplica(t *testing.T, url, id string, peers ...string) *aibrixReplica {
	t.Helper()
	r := startReplica(t, url, id, peers...)
	st := r.svc.EnableAIBrixSessions(core.AIBrixSessionConfig{})
	h, err := aibrix.NewHandler(aibrix.Config{
		Policy:   &aibrix.Policy{SessionKey: "sessionId", SessionTTL: time.Minute},
		Sessions: Sessions{Table: st},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &aibrixReplica{replica: r, sessions: st, h: h}
}

// cand is one AIBrix candidate with its pod-wide running-request count.
type cand struct {
	id      string
	running int
}

// aibrixAnswer is the part of a decision the tests check.
type aibrixAnswer struct {
	Decision, Reason, Target string
	Port                     int
}

// decide posts one request of session sid on model "llama" to h.
func decide(t *testing.T, h http.Handler, sid string, cands ...cand) aibrixAnswer {
	t.Helper()
	cs := make([]any, len(cands))
	for i, c := range cands {
		cs[i] = map[string]any{"id": c.id, "ports": []int{8000}, "metrics": map[string]any{"runningRequests": c.running}}
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": aibrix.APIVersion, "kind": aibrix.KindRequest,
		"metadata": map[string]any{"requestId": "r-" + sid},
		"spec": map[string]any{"model": "llama", "policyMode": "Authoritative", "candidates": cs,
			"policyContext": map[string]any{"attributes": map[string]any{"sessionId": sid}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, aibrix.DefaultPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", aibrix.MediaType)
	req.Header.Set("X-Request-Id", "r-"+sid)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("decision status %d: %s", rec.Code, rec.Body)
	}
	var resp struct {
		Status struct {
			Decision, Reason string
			Target           struct {
				ID   string
				Port int
			}
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	return aibrixAnswer{resp.Status.Decision, resp.Status.Reason, resp.Status.Target.ID, resp.Status.Target.Port}
}

// waitBinding polls r's table until session sid is bound to candidate.
func waitBinding(t *testing.T, r *aibrixReplica, sid, candidate string) {
	t.Helper()
	natstest.WaitFor(t, poll.Generous, func() error {
		got, ok := r.sessions.Get(core.AIBrixSessionKey{Model: "llama", Session: sid}, time.Now())
		if !ok || got.Candidate != candidate {
			return fmt.Errorf("%s: session %s bound to %+v (%v), want %s", r.id, sid, got, ok, candidate)
		}
		return nil
	})
}

func TestAIBrixSessionsAcrossReplicas(t *testing.T) {
	srv := natstest.RunServer(t)
	a := startAIBrixReplica(t, srv.ClientURL(), "a", "b")
	b := startAIBrixReplica(t, srv.ClientURL(), "b", "a")

	// a picks the least-loaded pod x and binds the session.
	if got := decide(t, a.h, "s1", cand{"ns/x", 0}, cand{"ns/y", 5}); got.Target != "ns/x" || got.Reason != aibrix.ReasonLeastLoaded {
		t.Fatalf("a's first decision %+v", got)
	}
	// Once the binding has reached b, b answers x although y is now far less loaded.
	waitBinding(t, b, "s1", "ns/x")
	if got := decide(t, b.h, "s1", cand{"ns/x", 9}, cand{"ns/y", 0}); got.Target != "ns/x" || got.Port != 8000 ||
		got.Reason != aibrix.ReasonSessionAffinity {
		t.Fatalf("b ignored a's binding: %+v", got)
	}
	// A session nobody bound is decided on load alone: the stickiness above came from a.
	if got := decide(t, b.h, "s2", cand{"ns/x", 9}, cand{"ns/y", 0}); got.Target != "ns/y" {
		t.Fatalf("unbound session on b: %+v", got)
	}

	// x leaves b's snapshot: b moves the session to z with a newer version, and a follows.
	if got := decide(t, b.h, "s1", cand{"ns/y", 3}, cand{"ns/z", 1}); got.Target != "ns/z" || got.Reason != aibrix.ReasonLeastLoaded {
		t.Fatalf("b's move %+v", got)
	}
	waitBinding(t, a, "s1", "ns/z")
	if got := decide(t, a.h, "s1", cand{"ns/x", 0}, cand{"ns/z", 7}); got.Target != "ns/z" || got.Reason != aibrix.ReasonSessionAffinity {
		t.Fatalf("a ignored b's move: %+v", got)
	}

	// a bound once (s1 → x), b twice (s2 → y, s1 → z); each applied the other's.
	if st := a.sessions.Stats(); st.Applied < 1 || st.Binds != 1 {
		t.Fatalf("a's table stats %+v", st)
	}
	if st := b.sessions.Stats(); st.Applied < 1 || st.Binds != 2 {
		t.Fatalf("b's table stats %+v", st)
	}
}

// TestAIBrixSessionsWithoutTable: a replica that never enabled AIBrix sessions drops peers'
// target bindings (nothing to apply them to) and keeps replicating everything else.
func TestAIBrixSessionsWithoutTable(t *testing.T) {
	srv := natstest.RunServer(t)
	a := startAIBrixReplica(t, srv.ClientURL(), "a", "b")
	b := startReplica(t, srv.ClientURL(), "b", "a")
	decide(t, a.h, "s1", cand{"ns/x", 0})
	natstest.WaitFor(t, poll.Generous, func() error {
		if st := b.br.Stats(); st.Affinity.Received < 1 {
			return fmt.Errorf("b received %d affinity messages", st.Affinity.Received)
		}
		return nil
	})
	// Lifecycle replication still works next to it.
	book(t, a.replica, "req-1", 1)
	waitSameLoads(t, a.replica, b)
}
