package core

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core/engine"
)

// joinBus wires an already-built test service to the bus over nc as replica id, as New does
// with WithTransport (the service then owns the replicator: Close closes it).
func joinBus(t testing.TB, s *Service, id string, rc ReplicationConfig, nc *nats.Conn) *BusReplicator {
	t.Helper()
	s.cfg.ReplicaID = id
	s.tr = bus.NewNATSTransport(nc)
	if err := s.enableReplication(rc, s.tr); err != nil {
		t.Fatal(err)
	}
	return s.Replication()
}

// replica is one Service joined to the bus.
type replica struct {
	id  string
	svc *Service
	br  *BusReplicator
	nc  *nats.Conn
	rt  *ResyncTrigger
}

// startReplica builds a Service with KV events off, connects it to url with fast reconnects,
// enables replication with peers and registers workers 1 and 2 (two ranks each).
func startReplica(t testing.TB, url, id string, peers ...string) *replica {
	t.Helper()
	return startReplicaWith(t, url, id, nil, peers...)
}

// noDeadPeer is a startReplicaWith hook that holds the dead-peer rule off (an hour): for tests
// of another repair path whose outage, on a loaded machine, can outlast the default interval.
func noDeadPeer(rc *ReplicationConfig) { rc.Bus.DeadAfter = time.Hour }

// startReplicaWith is startReplica with a hook to adjust the replication config.
func startReplicaWith(t testing.TB, url, id string, edit func(*ReplicationConfig), peers ...string) *replica {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	rt := &ResyncTrigger{}
	nc, err := bus.Connect(bus.ConnConfig{Name: id, URLs: url, NoEcho: true, ReconnectWait: 20 * time.Millisecond,
		OnReconnect: rt.Fire})
	if err != nil {
		t.Fatal(err)
	}
	rc := ReplicationConfig{
		Bus:    bus.Config{Cluster: "resync", Peers: peers, HeartbeatInterval: 100 * time.Millisecond},
		Resync: rt, ResyncDelay: 100 * time.Millisecond, JoinResyncDelay: 50 * time.Millisecond,
	}
	if edit != nil {
		edit(&rc)
	}
	svc, err := New(Config{Engine: cfg, ReplicaID: id, Seed: uint64(len(id)) + 1, Replication: rc}, WithTransport(bus.NewNATSTransport(nc)))
	if err != nil {
		t.Fatal(err)
	}
	br := svc.Replication()
	svc.Start()
	t.Cleanup(func() {
		_ = svc.Close()
		_ = br.Close()
		nc.Close()
	})
	for _, w := range []uint64{1, 2} {
		if _, err := svc.UpsertWorker(testWorker(w, 2)); err != nil {
			t.Fatal(err)
		}
	}
	return &replica{id: id, svc: svc, br: br, nc: nc, rt: rt}
}
