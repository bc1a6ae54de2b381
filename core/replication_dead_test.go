package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/internal/tcpproxy"
)

// TestDeadPeerReleasedAndReadmitted: replica b reaches the real nats-server through a TCP
// proxy. A black hole (the proxy stops moving bytes; no connection closes) silences b's
// heartbeats: after the dead-peer interval a releases the bookings it mirrors from b. When
// the black hole ends, b is re-admitted and its bookings are mirrored again.
func TestDeadPeerReleasedAndReadmitted(t *testing.T) {
	srv := natstest.RunServer(t)
	proxy := tcpproxy.New(t, srv.Addr().String())
	dead := func(rc *ReplicationConfig) { rc.Bus.DeadAfter = 500 * time.Millisecond }
	a := startReplicaWith(t, srv.ClientURL(), "tcp://a:9092", dead, "tcp://b:9092")
	b := startReplicaWith(t, proxy.URL(), "tcp://b:9092", dead, "tcp://a:9092")
	waitMembers(t, a, 1)
	waitMembers(t, b, 1)
	for i := range 3 {
		book(t, b, fmt.Sprintf("b-%d", i), i)
	}
	waitActive(t, a, 3)

	start := time.Now()
	proxy.Pause()
	waitActive(t, a, 0)
	t.Logf("b's bookings released on a %v after the black hole began", time.Since(start).Round(time.Millisecond))
	if st := a.br.DeadPeerStats(); st.Released < 1 || st.Bookings != 3 {
		t.Fatalf("dead-peer stats %+v, want >= 1 release of 3 bookings", st)
	}
	if got := activeRequests(b.svc); got != 3 {
		t.Fatalf("b lost its own bookings: %d active", got)
	}

	proxy.Resume()
	waitActive(t, a, 3)
	waitSameLoads(t, b, a)
	// b republishes its bookings when it sees a join again, which can reach a before a handles
	// b's own return (readmitPeer): the count is polled, not read once.
	natstest.WaitFor(t, syncTimeout, func() error {
		if st := a.br.DeadPeerStats(); st.Readmits < 1 {
			return fmt.Errorf("dead-peer stats %+v, want a re-admission", st)
		}
		return nil
	})
}

// TestLeavingPeerReleased: a peer that shuts down (leave message) has its mirrored bookings
// released at once, without waiting for the dead-peer interval.
func TestLeavingPeerReleased(t *testing.T) {
	srv := natstest.RunServer(t)
	a := startReplicaWith(t, srv.ClientURL(), "a", noDeadPeer, "b")
	b := startReplicaWith(t, srv.ClientURL(), "b", noDeadPeer, "a")
	waitMembers(t, a, 1)
	book(t, b, "b-0", 0)
	waitActive(t, a, 1)
	_ = b.svc.Close()
	_ = b.br.Close() // publishes the leave
	waitActive(t, a, 0)
}

func waitActive(t *testing.T, r *replica, n uint64) {
	t.Helper()
	natstest.WaitFor(t, syncTimeout, func() error {
		if got := activeRequests(r.svc); got != n {
			return fmt.Errorf("%s has %d active requests, want %d", r.id, got, n)
		}
		return nil
	})
}

func waitMembers(t *testing.T, r *replica, n int) {
	t.Helper()
	natstest.WaitFor(t, syncTimeout, func() error {
		if got := len(r.br.Members()); got != n {
			return fmt.Errorf("%s sees %d members, want %d", r.id, got, n)
		}
		return nil
	})
}
