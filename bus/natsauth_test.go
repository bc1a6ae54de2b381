package bus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Tests of bus authentication against real embedded servers with kvselect's authenticator.

const testSecret = "0123456789abcdef0123456789abcdef-test"

// authServer starts an embedded server on a loopback port that admits replicas "a" and "b" by
// the shared secret and replica "c" only by its nkey. It returns the server and c's seed file.
func authServer(t *testing.T) (*Embedded, string) {
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
	af, err := ParseAuthFile([]byte("secret: " + testSecret + "\nreplicas:\n  - id: c\n    nkey: " + pub + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := startEmbedded(t, EmbeddedOptions{ListenAddr: "127.0.0.1:0", Auth: af, AuthCluster: "it"})
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
		"other's password":  {nats.UserInfo("a", ReplicaPassword(testSecret, "b"))},
		"wrong secret":      {nats.UserInfo("a", ReplicaPassword(testSecret+"x", "a"))},
		"nkey-only replica": {nats.UserInfo("c", ReplicaPassword(testSecret, "c"))},
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
	subj, _ := NewSubjects("it")

	// Replica a (by secret) and c (by nkey) run real replicators; b is a hand-driven client.
	var sa sink
	a := newNATSRep(t, connect(t, ConnConfig{Name: "a", URLs: url, User: "a", Password: ReplicaPassword(testSecret, "a")}),
		sa.hook(Config{ReplicaID: "a", Peers: []string{"b", "c"}}))
	c := newNATSRep(t, connect(t, ConnConfig{Name: "c", URLs: url, NkeySeedFile: seedFile}), Config{ReplicaID: "c"})
	c.PublishLifecycle(freeEvent("from-c"))
	waitFor(t, func() error {
		if l := sa.lifecycles(); len(l) != 1 || l[0].RequestID != "from-c" {
			return fmt.Errorf("a applied %+v", l)
		}
		return nil
	})

	var errsB asyncErrs
	ncB, err := rawConnect(url, nats.UserInfo("b", ReplicaPassword(testSecret, "b")), errsB.handler())
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
	forged, _ := Marshal(&Lifecycle{Sender: "a", BootID: a.BootID(), Model: "m", RequestID: "forged", Kind: LifecycleFree})
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
	honest, _ := Marshal(&Lifecycle{Sender: "b", BootID: 7, Model: "m", RequestID: "from-b", Kind: LifecycleFree})
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
	af, err := ParseAuthFile([]byte(`{"secret": "` + testSecret + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	opts := func(routes ...string) EmbeddedOptions {
		return EmbeddedOptions{ClusterName: "kv", ClusterListen: "127.0.0.1:0", ClusterRoutes: routes, Auth: af, AuthCluster: "it"}
	}
	s1 := startEmbedded(t, opts())
	s2 := startEmbedded(t, opts(s1.ClusterURL()))
	waitFor(t, func() error {
		if s1.NumRoutes() < 1 || s2.NumRoutes() < 1 {
			return fmt.Errorf("routes %d/%d", s1.NumRoutes(), s2.NumRoutes())
		}
		return nil
	})
	var sb sink
	a := newNATSRep(t, connect(t, ConnConfig{Name: "a", Embedded: s1, User: "a", Password: ReplicaPassword(testSecret, "a")}), Config{ReplicaID: "a"})
	newNATSRep(t, connect(t, ConnConfig{Name: "b", Embedded: s2, User: "b", Password: ReplicaPassword(testSecret, "b")}),
		sb.hook(Config{ReplicaID: "b", Peers: []string{"a"}}))
	waitFor(t, func() error {
		a.PublishLifecycle(freeEvent("over-route"))
		if len(sb.lifecycles()) == 0 {
			return errors.New("nothing crossed the route yet")
		}
		return nil
	})
	// A server with no auth file (no route password) is refused by s1: s1 never registers a
	// route to it. (The intruder's own side may count a route for the instant between s1's
	// INFO and s1 closing the connection, so s1's route table is what is checked.)
	intruder := startEmbedded(t, EmbeddedOptions{ClusterName: "kv", ClusterListen: "127.0.0.1:0", ClusterRoutes: []string{s1.ClusterURL()}})
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		rz, err := s1.Server().Routez(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rz.Routes {
			if r.RemoteID == intruder.Server().ID() {
				t.Fatal("a server without the route password joined the cluster")
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestParseAuthFileRejects(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	for name, doc := range map[string]string{
		"empty":         "{}",
		"short secret":  "secret: short",
		"unknown field": "secret: " + testSecret + "\nsecrt: x",
		"bad nkey":      "replicas:\n  - id: a\n    nkey: SUAXXXX",
		"seed as nkey":  "replicas:\n  - id: a\n    nkey: " + strings.Replace(pub, "U", "S", 1),
		"duplicate id":  "replicas:\n  - id: a\n    nkey: " + pub + "\n  - id: a\n    nkey: " + pub,
		"empty id":      "replicas:\n  - id: ''\n    nkey: " + pub,
	} {
		if _, err := ParseAuthFile([]byte(doc)); !errors.Is(err, ErrAuthFile) {
			t.Errorf("%s: err %v, want ErrAuthFile", name, err)
		}
	}
}

// FuzzParseAuthFile: the auth-file parser never panics, and what it accepts is valid.
func FuzzParseAuthFile(f *testing.F) {
	f.Add([]byte("secret: " + testSecret))
	f.Add([]byte(`{"replicas":[{"id":"a","nkey":"UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"}]}`))
	f.Add([]byte("replicas: [1, 2]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ParseAuthFile(b)
		if err != nil {
			return
		}
		if a.Secret == "" && len(a.Replicas) == 0 {
			t.Fatal("accepted a file that admits nobody")
		}
		for _, r := range a.Replicas {
			if ValidateReplicaID(r.ID) != nil || !nkeys.IsValidPublicUserKey(r.Nkey) {
				t.Fatalf("accepted replica %+v", r)
			}
		}
	})
}

// TestAuthSnapshotRequestReply: under the permissions, a replica serves snapshot requests on
// its own subject and another replica's request gets the reply (TestAuthPermissions shows that
// nobody else may subscribe to that subject).
func TestAuthSnapshotRequestReply(t *testing.T) {
	e, _ := authServer(t)
	url := e.ClientURL()
	a := newNATSRep(t, connect(t, ConnConfig{Name: "a", URLs: url, User: "a", Password: ReplicaPassword(testSecret, "a")}), Config{ReplicaID: "a"})
	b := newNATSRep(t, connect(t, ConnConfig{Name: "b", URLs: url, User: "b", Password: ReplicaPassword(testSecret, "b")}), Config{ReplicaID: "b"})
	if err := a.ServeSnapshot(func(req []byte) ([]byte, error) { return append([]byte("snap:"), req...), nil }); err != nil {
		t.Fatal(err)
	}
	reply, err := b.RequestSnapshot(context.Background(), "a", []byte("q"))
	if err != nil || string(reply) != "snap:q" {
		t.Fatalf("snapshot reply %q, %v", reply, err)
	}
}
