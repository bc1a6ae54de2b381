package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/aibrix"
	"github.com/kvselect/kvselect/http/api"
)

// HTTP tests of the AIBrix wiring: two replicas built the way run() builds them (replication
// over a real nats-server, then aibrixHandler, then api.New) each serve the decision endpoint
// on a real loopback socket, and an AIBrix session sticks across them.

const syncTimeout = 60 * time.Second

// aibrixNode is one replica serving the AIBrix endpoint over HTTP.
type aibrixNode struct {
	id  string
	svc *core.Service
	url string
}

// startAIBrixNode starts a replica on natsURL whose AIBrix policy is policyYAML.
func startAIBrixNode(t *testing.T, natsURL, id, peer, policyYAML string) *aibrixNode {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	log := slog.New(slog.DiscardHandler)
	nc, err := bus.Connect(bus.ConnConfig{Name: id, URLs: natsURL, NoEcho: true})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := core.New(core.Config{Engine: cfg, ReplicaID: id, Logger: log, Replication: core.ReplicationConfig{Bus: bus.Config{Cluster: "aibrix", Peers: []string{peer}}}},
		core.WithTransport(bus.NewNATSTransport(nc)))
	if err != nil {
		t.Fatal(err)
	}
	svc.Start()
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte(policyYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &options{aibrixPath: aibrix.DefaultPath, aibrixPolicyFile: policy}
	ab, err := aibrixHandler(o, svc, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(svc, api.Options{Logger: log, AIBrix: ab, AIBrixPath: o.aibrixPath}))
	t.Cleanup(func() {
		srv.Close()
		_ = svc.Close() // and its replicator
		nc.Close()
	})
	return &aibrixNode{id: id, svc: svc, url: srv.URL + aibrix.DefaultPath}
}

// pod is one candidate with its pod-wide running-request count.
type pod struct {
	id      string
	running int
}

// decision is what the tests read from an answer.
type decision struct {
	Decision, Reason, Target string
	Port                     int
}

// decideHTTP posts one request of session sid for model "llama" to n.
func decideHTTP(t *testing.T, n *aibrixNode, sid string, pods ...pod) decision {
	t.Helper()
	cs := make([]any, len(pods))
	for i, p := range pods {
		cs[i] = map[string]any{"id": p.id, "ports": []int{8000, 8001}, "metrics": map[string]any{"runningRequests": p.running}}
	}
	reqID := fmt.Sprintf("%s-%s-%d", n.id, sid, time.Now().UnixNano())
	body, err := json.Marshal(map[string]any{
		"apiVersion": aibrix.APIVersion, "kind": aibrix.KindRequest,
		"metadata": map[string]any{"requestId": reqID},
		"spec": map[string]any{"model": "llama", "policyMode": "Advisory", "candidates": cs,
			"policyContext": map[string]any{"attributes": map[string]any{"sessionId": sid}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", aibrix.MediaType)
	req.Header.Set("X-Request-Id", reqID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d, %v: %s", n.id, resp.StatusCode, err, raw)
	}
	var out struct {
		Status struct {
			Decision, Reason string
			Target           struct {
				ID   string
				Port int
			}
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return decision{out.Status.Decision, out.Status.Reason, out.Status.Target.ID, out.Status.Target.Port}
}

// waitBound polls n's replicated table (not its endpoint, whose answers would bind) until
// session sid of model "llama" is bound to candidate.
func waitBound(t *testing.T, n *aibrixNode, sid, candidate string) {
	t.Helper()
	natstest.WaitFor(t, syncTimeout, func() error {
		st := n.svc.AIBrixSessions()
		if st == nil {
			return fmt.Errorf("%s has no AIBrix session table", n.id)
		}
		got, ok := st.Get(core.AIBrixSessionKey{Model: "llama", Session: sid}, time.Now())
		if !ok || got.Candidate != candidate {
			return fmt.Errorf("%s: %s bound to %+v (%v), want %s", n.id, sid, got, ok, candidate)
		}
		return nil
	})
}

func TestAIBrixStickinessAcrossReplicasHTTP(t *testing.T) {
	srv := natstest.RunServer(t)
	const policy = "sessionKey: sessionId\nsessionTTL: 5m\n"
	a := startAIBrixNode(t, srv.ClientURL(), "a", "b", policy)
	b := startAIBrixNode(t, srv.ClientURL(), "b", "a", policy)

	first := decideHTTP(t, a, "s1", pod{"ns/x", 0}, pod{"ns/y", 5})
	if first.Decision != "Selected" || first.Target != "ns/x" || first.Reason != aibrix.ReasonLeastLoaded {
		t.Fatalf("a's first decision %+v", first)
	}
	waitBound(t, b, "s1", "ns/x")
	// On b, y is now much less loaded, but the session stays on x and its port.
	if got := decideHTTP(t, b, "s1", pod{"ns/x", 20}, pod{"ns/y", 0}); got.Target != "ns/x" ||
		got.Port != first.Port || got.Reason != aibrix.ReasonSessionAffinity {
		t.Fatalf("b did not honour a's binding: %+v (first %+v)", got, first)
	}
	// Control: another session on b follows load.
	if got := decideHTTP(t, b, "s2", pod{"ns/x", 20}, pod{"ns/y", 0}); got.Target != "ns/y" {
		t.Fatalf("unbound session on b: %+v", got)
	}
	// x leaves the snapshot on b: the session moves to z there, and a follows the move.
	if got := decideHTTP(t, b, "s1", pod{"ns/y", 4}, pod{"ns/z", 1}); got.Target != "ns/z" {
		t.Fatalf("b's move: %+v", got)
	}
	waitBound(t, a, "s1", "ns/z")
	if got := decideHTTP(t, a, "s1", pod{"ns/x", 0}, pod{"ns/z", 9}); got.Target != "ns/z" || got.Reason != aibrix.ReasonSessionAffinity {
		t.Fatalf("a did not follow b's move: %+v", got)
	}
}

// TestAIBrixHandlerWithoutSessionKey: a policy without a session key attaches no table, so a
// replica keeps no AIBrix session state for peers.
func TestAIBrixHandlerWithoutSessionKey(t *testing.T) {
	srv := natstest.RunServer(t)
	n := startAIBrixNode(t, srv.ClientURL(), "a", "b", "noMatchReason: Nope\n")
	if st := n.svc.AIBrixSessions(); st != nil {
		t.Fatalf("table attached without a session key: %+v", st.Stats())
	}
	if got := decideHTTP(t, n, "s1", pod{"ns/x", 3}, pod{"ns/y", 0}); got.Target != "ns/y" {
		t.Fatalf("decision %+v", got)
	}
}
