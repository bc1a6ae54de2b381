package core

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/core/engine"
)

// TestPeerRegisteredByAliasMirrorsBookings: Dynamo's endpoint picker registers peers as
// tcp://<pod-ip>:<sync-port>, while a replica's id is tcp://<hostname>:<port>. Replica A
// announces its pod-IP alias in its heartbeats; B registers A by that alias only, and A's
// booking must show up in B's /loads. Before aliases, B dropped A's events as coming from a
// non-peer and its /loads stayed 0. Two real Services over a real nats-server.
func TestPeerRegisteredByAliasMirrorsBookings(t *testing.T) {
	srv := natstest.RunServer(t)
	url := srv.ClientURL()
	const aID, aIP, bID = "tcp://selector-a:9092", "tcp://10.1.2.3:9092", "tcp://selector-b:9092"
	a := startReplicaWith(t, url, aID, func(c *ReplicationConfig) { c.Bus.Aliases = []string{aIP, "tcp://selector-a.ns.svc:9092"} })
	b := startReplica(t, url, bID)
	if added, err := b.svc.RegisterPeer(aIP); err != nil || !added {
		t.Fatalf("register A by its IP on B: %v %v", added, err)
	}
	// A registering itself under an alias is refused, like its own id.
	if _, err := a.svc.RegisterPeer(aIP); !errors.Is(err, engine.ErrBadRequest) {
		t.Fatalf("A registering its own alias: %v, want 400", err)
	}
	// B learns A's aliases from A's heartbeats; from then on A is B's peer.
	natstest.WaitFor(t, syncTimeout, func() error {
		if !b.br.isPeer(aID) {
			return fmt.Errorf("B does not recognise %s as its peer %s", aID, aIP)
		}
		return nil
	})
	book(t, a, "r1", 1)
	natstest.WaitFor(t, syncTimeout, func() error {
		if got, want := activeRequests(b.svc), activeRequests(a.svc); got != want || got == 0 {
			return fmt.Errorf("B's /loads show %d active requests, A has %d", got, want)
		}
		return nil
	})
	// A registered peer that announces no matching alias stays a non-peer: C's bookings never
	// reach B.
	c := startReplica(t, url, "tcp://selector-c:9092")
	book(t, c, "c1", 99)
	before := activeRequests(b.svc)
	book(t, a, "after-c", 100)
	natstest.WaitFor(t, syncTimeout, func() error {
		if got := activeRequests(b.svc); got != before+1 {
			return fmt.Errorf("B has %d active requests, want %d (A's new booking, none of C's)", got, before+1)
		}
		return nil
	})
	// Deregistering the alias makes A a non-peer of B again.
	if err := b.svc.DeregisterPeer(aIP); err != nil {
		t.Fatal(err)
	}
	if b.br.isPeer(aID) {
		t.Fatal("A is still B's peer after its alias was deregistered")
	}
}
