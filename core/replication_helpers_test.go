package core

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/kvselect/kvselect/bus"
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
