package integration

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
)

// Peer management and membership across real processes: the /replica_sync routes, the
// membership view, --discover-peers, and a replica killed and restarted under the same id.

// member returns id's row in r's /replica_sync/members.
func member(t testing.TB, r *replica, id string) (core.MemberInfo, bool) {
	t.Helper()
	var ms []core.MemberInfo
	r.must(t, http.StatusOK, "GET", "/replica_sync/members", nil, &ms)
	for _, m := range ms {
		if m.ReplicaID == id {
			return m, true
		}
	}
	return core.MemberInfo{}, false
}

// waitHeardAfter polls until r has received a heartbeat from id stamped more than one beat
// after t0. Heartbeats and lifecycle events of one replica leave on one connection through one
// server, so everything id published before t0 has reached r by then.
func waitHeardAfter(t testing.TB, r *replica, id string, t0 time.Time) {
	t.Helper()
	waitFor(t, syncTimeout, func() error {
		m, ok := member(t, r, id)
		if !ok {
			return fmt.Errorf("%s does not list %s", r.id, id)
		}
		if !m.LastSeen.After(t0.Add(1200 * time.Millisecond)) {
			return fmt.Errorf("%s last heard %s at %v, waiting for a beat after %v", r.id, id, m.LastSeen, t0)
		}
		return nil
	})
}

func TestClusterPeerRoutes(t *testing.T) {
	needBinaries(t)
	ns := startNATS(t, 0)
	a := startReplica(t, "a", "--nats-url", ns.url())
	b := startReplica(t, "b", "--nats-url", ns.url(), "--replica-sync-peers", "tcp://z:9092")
	for _, r := range []*replica{a, b} {
		registerCatalog(t, r)
	}

	// register_peer: 201 when new, 200 when present; peers come back sorted.
	peer := func(path, ep string) int {
		code, _ := b.call("POST", "/replica_sync/"+path, map[string]any{"endpoint": ep}, nil)
		return code
	}
	steps := []struct {
		path, endpoint string
		want           int
	}{
		{"register_peer", "a", http.StatusCreated},
		{"register_peer", "a", http.StatusOK},
		{"register_peer", "tcp://m:9092", http.StatusCreated},
		{"register_peer", "tcp://z:9092", http.StatusOK}, // from --replica-sync-peers
		{"deregister_peer", "tcp://m:9092", http.StatusOK},
		{"deregister_peer", "tcp://m:9092", http.StatusNotFound},
		{"deregister_peer", "never-registered", http.StatusNotFound},
		{"register_peer", "", http.StatusBadRequest},
	}
	for _, s := range steps {
		if got := peer(s.path, s.endpoint); got != s.want {
			t.Fatalf("POST /replica_sync/%s %q = %d, want %d", s.path, s.endpoint, got, s.want)
		}
	}
	if code, _ := b.call("POST", "/replica_sync/register_peer", map[string]any{}, nil); code != http.StatusUnprocessableEntity {
		t.Fatalf("register_peer without endpoint = %d, want 422", code)
	}
	var peers []string
	b.must(t, http.StatusOK, "GET", "/replica_sync/peers", nil, &peers)
	if want := []string{"a", "tcp://z:9092"}; !slices.Equal(peers, want) {
		t.Fatalf("peers %v, want %v", peers, want)
	}
	var aPeers []string
	a.must(t, http.StatusOK, "GET", "/replica_sync/peers", nil, &aPeers)
	if len(aPeers) != 0 {
		t.Fatalf("A started without peers lists %v", aPeers)
	}

	// The registered peer's events are applied: A books, B mirrors.
	waitMembers(t, b, "a")
	book(t, a, "x1", 1)
	waitSameLoads(t, 1, a, b)

	// After deregistration A's events are ignored by B.
	b.must(t, http.StatusOK, "POST", "/replica_sync/deregister_peer", map[string]any{"endpoint": "a"}, nil)
	book(t, a, "x2", 2)
	waitHeardAfter(t, b, "a", time.Now())
	lb, err := loads(b)
	if err != nil {
		t.Fatal(err)
	}
	if n := totalActive(lb); n != 1 {
		t.Fatalf("B applied a non-peer's admission: %d active requests, want 1", n)
	}
	// A (with no peers) never applied B's events either.
	book(t, b, "y1", 3)
	waitHeardAfter(t, a, "b", time.Now())
	la, err := loads(a)
	if err != nil {
		t.Fatal(err)
	}
	if n := totalActive(la); n != 2 {
		t.Fatalf("A has %d active requests, want its own 2", n)
	}
}

func TestClusterMembers(t *testing.T) {
	needBinaries(t)
	ns := startNATS(t, 0)
	a := startReplica(t, "a", "--nats-url", ns.url(), "--replica-sync-peers", "b")
	b := startReplica(t, "b", "--nats-url", ns.url())
	c := startReplica(t, "c", "--nats-url", ns.url())
	ms := waitMembers(t, a, "b", "c")
	for _, m := range ms {
		want := map[string]string{"b": b.base, "c": c.base}[m.ReplicaID]
		if m.HTTPAddr != want {
			t.Errorf("member %s http_addr %q, want %q", m.ReplicaID, m.HTTPAddr, want)
		}
		if m.BootID == 0 || m.LastSeen.Before(m.FirstSeen) || m.StartedAt.IsZero() {
			t.Errorf("member %+v: want a boot id, started_at and last_seen >= first_seen", m)
		}
		if m.Peer != (m.ReplicaID == "b") {
			t.Errorf("member %s peer=%v; only b is a configured peer of a", m.ReplicaID, m.Peer)
		}
	}
	// last_seen advances with heartbeats.
	first, _ := member(t, a, "b")
	waitFor(t, syncTimeout, func() error {
		m, ok := member(t, a, "b")
		if !ok || !m.LastSeen.After(first.LastSeen) {
			return fmt.Errorf("last_seen of b not advancing: %+v", m)
		}
		return nil
	})
	// A graceful stop publishes a leave: c disappears without waiting for expiry.
	c.stopGracefully(t)
	waitMembers(t, a, "b")
	waitMembers(t, b, "a")
}

func TestClusterDiscoverPeers(t *testing.T) {
	needBinaries(t)
	ns := startNATS(t, 0)
	d := startReplica(t, "d", "--nats-url", ns.url(), "--discover-peers")
	e := startReplica(t, "e", "--nats-url", ns.url(), "--discover-peers")
	f := startReplica(t, "f", "--nats-url", ns.url()) // neither discovers nor lists peers
	for _, r := range []*replica{d, e, f} {
		registerCatalog(t, r)
	}
	waitMembers(t, d, "e", "f")
	waitMembers(t, e, "d", "f")
	book(t, d, "d1", 1)
	book(t, e, "e1", 2)
	waitSameLoads(t, 2, d, e)
	waitHeardAfter(t, f, "d", time.Now())
	waitHeardAfter(t, f, "e", time.Now())
	lf, err := loads(f)
	if err != nil {
		t.Fatal(err)
	}
	if n := totalActive(lf); n != 0 {
		t.Fatalf("F without peers applied %d bookings", n)
	}
	// Discovered peers are not configured ones: /replica_sync/peers stays empty.
	var peers []string
	d.must(t, http.StatusOK, "GET", "/replica_sync/peers", nil, &peers)
	if len(peers) != 0 {
		t.Fatalf("discovered peers leaked into /replica_sync/peers: %v", peers)
	}
}

// TestClusterReplicaRestart: A is killed with SIGKILL (no leave message) and started again
// with the same id. B recognises the new boot id and drops the bookings it mirrored from A's
// previous life; the new A learns B's live bookings from B's republish.
func TestClusterReplicaRestart(t *testing.T) {
	needBinaries(t)
	ns := startNATS(t, 0)
	a := startReplica(t, "a", "--nats-url", ns.url(), "--replica-sync-peers", "b")
	b := startReplica(t, "b", "--nats-url", ns.url(), "--replica-sync-peers", "a")
	for _, r := range []*replica{a, b} {
		registerCatalog(t, r)
	}
	waitMembers(t, a, "b")
	waitMembers(t, b, "a")
	book(t, a, "a1", 1)
	book(t, a, "a2", 2)
	book(t, b, "b1", 3)
	waitSameLoads(t, 3, a, b)
	oldBoot, _ := member(t, b, "a")

	a.p.kill(t)
	a.start(t)
	registerCatalog(t, a)
	waitFor(t, syncTimeout, func() error {
		m, ok := member(t, b, "a")
		if !ok || m.BootID == oldBoot.BootID {
			return fmt.Errorf("b has not seen a's new boot: %+v", m)
		}
		return nil
	})
	// Only b1 survives, on both.
	waitSameLoads(t, 1, b, a)
	book(t, a, "a3", 4)
	waitSameLoads(t, 2, b, a)
}
