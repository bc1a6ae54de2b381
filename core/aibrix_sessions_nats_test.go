package core

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/http/aibrix"
	"github.com/kvselect/kvselect/internal/poll"
)

// Two Services on a real nats-server, each serving the AIBrix decision handler (in process)
// over its replicated session table: a binding made through one replica's handler is honoured
// by the other's, a move made on the second reaches the first, and a replica without a table
// drops target bindings while lifecycle replication goes on.

// aibrixStore adapts the core table to aibrix.SessionStore inside this test (http/api holds
// the production adapter; core tests cannot import it).
type aibrixStore struct{ s *AIBrixSessions }

func (a aibrixStore) Get(k aibrix.SessionKey, now time.Time) (aibrix.Binding, bool) {
	t, ok := a.s.Get(AIBrixSessionKey{Model: k.Model, Session: k.Value}, now)
	return aibrix.Binding{CandidateID: t.Candidate, Port: int(t.Port)}, ok
}

func (a aibrixStore) Bind(k aibrix.SessionKey, b aibrix.Binding, ttl time.Duration, now time.Time) {
	a.s.Bind(AIBrixSessionKey{Model: k.Model, Session: k.Value}, AIBrixTarget{Candidate: b.CandidateID, Port: uint32(b.Port)}, ttl, now)
}

// aibrixReplica is a replica with its AIBrix handler and session table.
type aibrixReplica struct {
	*replica
	sessions *AIBrixSessions
	h        http.Handler
}

// startAIBrixReplica starts a replica whose AIBrix policy keys sessions on "sessionId".
func startAIBrixReplica(t *testing.T, url, id string, peers ...string) *aibrixReplica {
	t.Helper()
	r := startReplica(t, url, id, peers...)
	st := r.svc.EnableAIBrixSessions(AIBrixSessionConfig{})
	h, err := aibrix.NewHandler(aibrix.Config{
		Policy:   &aibrix.Policy{SessionKey: "sessionId", SessionTTL: time.Minute},
		Sessions: aibrixStore{st},
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
	natstest.WaitFor(t, syncTimeout, func() error {
		got, ok := r.sessions.Get(AIBrixSessionKey{Model: "llama", Session: sid}, time.Now())
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
	natstest.WaitFor(t, syncTimeout, func() error {
		if st := b.br.Stats(); st.Affinity.Received < 1 {
			return fmt.Errorf("b received %d affinity messages", st.Affinity.Received)
		}
		return nil
	})
	// Lifecycle replication still works next to it.
	book(t, a.replica, "req-1", 1)
	waitSameLoads(t, a.replica, b)
}

// BenchmarkAIBrixSessionPropagation measures one AIBrix binding's trip between two replicas
// over loopback NATS: a Bind on a that moves the session, until b's table returns the new
// target. ns/op is the propagation latency (encode, bus queues, NATS, decode, Apply) plus up
// to one 20 µs polling interval and its timer slack; b is polled, not hooked, because the
// table has no apply hook. A busy-polling loop starves the bus goroutines on a 2-core host.
func BenchmarkAIBrixSessionPropagation(b *testing.B) {
	srv := natstest.RunServer(b)
	ra := startReplica(b, srv.ClientURL(), "a", "b")
	rb := startReplica(b, srv.ClientURL(), "b", "a")
	sa := ra.svc.EnableAIBrixSessions(AIBrixSessionConfig{})
	sb := rb.svc.EnableAIBrixSessions(AIBrixSessionConfig{})
	key := AIBrixSessionKey{Model: "llama", Session: "bench"}
	targets := []AIBrixTarget{podX, podY}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		want := targets[i%2]
		sa.Bind(key, want, time.Minute, time.Now())
		err := poll.Poll(syncTimeout, 20*time.Microsecond, func() error {
			if got, ok := sb.Get(key, time.Now()); !ok || got != want {
				return fmt.Errorf("binding %d did not reach b", i)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
}
