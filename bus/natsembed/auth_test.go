package natsembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/internal/poll"
)

// Tests of bus authentication against real embedded servers with kvselect's authenticator.

const testSecret = "0123456789abcdef0123456789abcdef-test"

// authServer starts an embedded server on a loopback port that admits replicas "a" and "b" by
// the shared secret and replica "c" only by its nkey. It returns the server and c's seed file.
func authServer(t *testing.T) (*Server, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	seedFile := filepath.Join(t.TempDir(), "c.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	af, err := bus.ParseAuthFile([]byte("secret: " + testSecret + "\nreplicas:\n  - id: c\n    nkey: " + pub + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := startServer(t, Options{ListenAddr: "127.0.0.1:0", Auth: af, AuthCluster: "it"})
	return e, seedFile
}

// rawConnect dials without kvselect's retry loop, so an authentication failure is returned.
func rawConnect(url string, opts ...nats.Option) (*nats.Conn, error) {
	return nats.Connect(url, append(opts, nats.NoReconnect(), nats.Timeout(5*time.Second))...)
}

// asyncErrs collects a connection's asynchronous errors (permission violations).
type asyncErrs struct {
	mu   sync.Mutex
	errs []error
}

func (a *asyncErrs) handler() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		a.mu.Lock()
		a.errs = append(a.errs, err)
		a.mu.Unlock()
	})
}

func (a *asyncErrs) waitViolation(t *testing.T, what string) {
	t.Helper()
	waitFor(t, func() error {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, e := range a.errs {
			if errors.Is(e, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(e.Error()), what) {
				return nil
			}
		}
		return fmt.Errorf("no %s permission violation yet: %v", what, a.errs)
	})
}

// TestAuthRefusesUnauthorisedClients: without credentials, with a wrong password, with
// another replica's password, or by password for an nkey-only replica, CONNECT fails: such a
// client can neither publish nor subscribe on anything.
func TestAuthRefusesUnauthorisedClients(t *testing.T) {
	e, _ := authServer(t)
	url := e.ClientURL()
	for name, opts := range map[string][]nats.Option{
		"anonymous":         nil,
		"wrong password":    {nats.UserInfo("a", "not-the-password")},
		"other's password":  {nats.UserInfo("a", bus.ReplicaPassword(testSecret, "b"))},
		"wrong secret":      {nats.UserInfo("a", bus.ReplicaPassword(testSecret+"x", "a"))},
		"nkey-only replica": {nats.UserInfo("c", bus.ReplicaPassword(testSecret, "c"))},
		"token":             {nats.Token(testSecret)},
	} {
		nc, err := rawConnect(url, opts...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: err %v, want an authorization violation", name, err)
		}
	}
}

// TestAuthPermissions: an authorised replica publishes on its own subjects only and reads only
// its own snapshot requests; a replica's events still flow to its peers.
func TestAuthPermissions(t *testing.T) {
	e, seedFile := authServer(t)
	url := e.ClientURL()
	subj, _ := bus.NewSubjects("it")

	// Replica a (by secret) and c (by nkey) run real replicators; b is a hand-driven client.
	var sa sink
	a := newNATSRep(t, connect(t, bus.ConnConfig{Name: "a", URLs: url, User: "a", Password: bus.ReplicaPassword(testSecret, "a")}),
		sa.hook(bus.Config{ReplicaID: "a", Peers: []string{"b", "c"}}))
	c := newNATSRep(t, connect(t, bus.ConnConfig{Name: "c", URLs: url, NkeySeedFile: seedFile}), bus.Config{ReplicaID: "c"})
	c.PublishLifecycle(freeEvent("from-c"))
	waitFor(t, func() error {
		if l := sa.lifecycles(); len(l) != 1 || l[0].RequestID != "from-c" {
			return fmt.Errorf("a applied %+v", l)
		}
		return nil
	})

	var errsB asyncErrs
	ncB, err := rawConnect(url, nats.UserInfo("b", bus.ReplicaPassword(testSecret, "b")), errsB.handler())
	if err != nil {
		t.Fatal(err)
	}
	defer ncB.Close()
	// b may not read a's snapshot requests.
	if _, err := ncB.SubscribeSync(subj.Snapshot("a")); err != nil {
		t.Fatal(err)
	}
	errsB.waitViolation(t, "subscription")
	// b may not publish on a's subject, nor on the v1 subjects.
	forged, _ := bus.Marshal(&bus.Lifecycle{Sender: "a", BootID: a.BootID(), Model: "m", RequestID: "forged", Kind: bus.LifecycleFree})
	for _, s := range []string{subj.LifecycleFrom("a"), subj.Lifecycle()} {
		if err := ncB.Publish(s, forged); err != nil {
			t.Fatal(err)
		}
	}
	_ = ncB.Flush()
	errsB.waitViolation(t, "publish")
	// b publishing on its own subject an envelope that claims to be a: delivered by NATS,
	// dropped by a, counted.
	if err := ncB.Publish(subj.LifecycleFrom("b"), forged); err != nil {
		t.Fatal(err)
	}
	// A real event from b's own subject after the forgery: once it arrives, the forgery has
	// been processed (one publisher, one subscription: in order).
	honest, _ := bus.Marshal(&bus.Lifecycle{Sender: "b", BootID: 7, Model: "m", RequestID: "from-b", Kind: bus.LifecycleFree})
	if err := ncB.Publish(subj.LifecycleFrom("b"), honest); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() error {
		if l := sa.lifecycles(); len(l) != 2 || l[1].RequestID != "from-b" {
			return fmt.Errorf("a applied %+v", l)
		}
		return nil
	})
	if st := a.Stats().Lifecycle; st.Impersonations != 1 {
		t.Fatalf("a's impersonation counter = %d, want 1", st.Impersonations)
	}
	for _, l := range sa.lifecycles() {
		if l.RequestID == "forged" {
			t.Fatal("forged event applied")
		}
	}
}

// TestAuthEmbeddedClusterRoutes: two embedded servers with auth form a cluster over
// authenticated routes and carry replicas' events; a server without the secret cannot join.
func TestAuthEmbeddedClusterRoutes(t *testing.T) {
	af, err := bus.ParseAuthFile([]byte(`{"secret": "` + testSecret + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	opts := func(routes ...string) Options {
		return Options{ClusterName: "kv", ClusterListen: "127.0.0.1:0", ClusterRoutes: routes, Auth: af, AuthCluster: "it"}
	}
	h := &recordHandler{}
	s1opts := opts()
	s1opts.Logger = slog.New(h)
	s1 := startServer(t, s1opts)
	s2 := startServer(t, opts(s1.ClusterURL()))
	waitFor(t, func() error {
		if s1.NumRoutes() < 1 || s2.NumRoutes() < 1 {
			return fmt.Errorf("routes %d/%d", s1.NumRoutes(), s2.NumRoutes())
		}
		return nil
	})
	var sb sink
	a := newNATSRep(t, connect(t, bus.ConnConfig{Name: "a", Embedded: s1, User: "a", Password: bus.ReplicaPassword(testSecret, "a")}), bus.Config{ReplicaID: "a"})
	newNATSRep(t, connect(t, bus.ConnConfig{Name: "b", Embedded: s2, User: "b", Password: bus.ReplicaPassword(testSecret, "b")}),
		sb.hook(bus.Config{ReplicaID: "b", Peers: []string{"a"}}))
	waitFor(t, func() error {
		a.PublishLifecycle(freeEvent("over-route"))
		if len(sb.lifecycles()) == 0 {
			return errors.New("nothing crossed the route yet")
		}
		return nil
	})
	// s1's route table is the probe: a server s1 admits appears there under its server ID, one
	// it refuses never does. (The refused server's own side may count a route for the instant
	// between s1's INFO and s1 closing the connection, so s1's table is what is checked.)
	routedToS1 := func(e *Server) bool {
		t.Helper()
		rz, err := s1.Server().Routez(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rz.Routes {
			if r.RemoteID == e.Server().ID() {
				return true
			}
		}
		return false
	}
	// A member with the route password and an intruder with no auth file (no route password)
	// dial s1 at the same time. Positive control: the member shows up in s1's table, so the
	// probe does see the routes s1 admits. The intruder must be seen refused, not merely absent
	// (it might not have dialled yet): s1 logs an authentication error for each route
	// connection it refuses, and only the intruder lacks the password.
	refusals := func() int { return h.countMessages("rid:", "authentication error") }
	start := time.Now()
	member := startServer(t, opts(s1.ClusterURL()))
	intruder := startServer(t, Options{ClusterName: "kv", ClusterListen: "127.0.0.1:0", ClusterRoutes: []string{s1.ClusterURL()}})
	poll.True(t, poll.Generous, "s1 to admit the member and refuse the intruder", func() bool {
		if routedToS1(intruder) {
			t.Fatal("a server without the route password joined the cluster")
		}
		return routedToS1(member) && refusals() > 0
	})
	// The refusal then holds for as long again as the member needed to join.
	window := time.Since(start)
	tick := time.NewTicker(poll.DefaultInterval)
	defer tick.Stop()
	for end := time.Now().Add(window); time.Now().Before(end); <-tick.C {
		if routedToS1(intruder) {
			t.Fatal("a server without the route password joined the cluster after being refused")
		}
		if !routedToS1(member) {
			t.Fatal("the member's route went away")
		}
	}
}

// TestAuthSnapshotRequestReply: under the permissions, a replica serves snapshot requests on
// its own subject and another replica's request gets the reply (TestAuthPermissions shows that
// nobody else may subscribe to that subject).
func TestAuthSnapshotRequestReply(t *testing.T) {
	e, _ := authServer(t)
	url := e.ClientURL()
	a := newNATSRep(t, connect(t, bus.ConnConfig{Name: "a", URLs: url, User: "a", Password: bus.ReplicaPassword(testSecret, "a")}), bus.Config{ReplicaID: "a"})
	b := newNATSRep(t, connect(t, bus.ConnConfig{Name: "b", URLs: url, User: "b", Password: bus.ReplicaPassword(testSecret, "b")}), bus.Config{ReplicaID: "b"})
	if err := a.ServeSnapshot(func(req []byte) ([]byte, error) { return append([]byte("snap:"), req...), nil }); err != nil {
		t.Fatal(err)
	}
	reply, err := b.RequestSnapshot(context.Background(), "a", []byte("q"))
	if err != nil || string(reply) != "snap:q" {
		t.Fatalf("snapshot reply %q, %v", reply, err)
	}
}
