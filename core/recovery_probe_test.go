package core

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/recovery"
)

// TestNATSRecoveryProbesLiveReplica: a replica that joins between two of A's heartbeats (here A
// beats once an hour, so B never hears one) and waits for none (DiscoveryWait 0) still recovers
// A's index over a real nats-server: it probes for a snapshot source instead of relying on
// heartbeats.
func TestNATSRecoveryProbesLiveReplica(t *testing.T) {
	srv := natstest.RunServer(t)
	join := func(id string, seed uint64) (*Service, int64) {
		svc := newKVService(t, seed)
		nc, err := bus.Connect(bus.ConnConfig{Name: id, URLs: srv.ClientURL(), NoEcho: true})
		if err != nil {
			t.Fatal(err)
		}
		br := joinBus(t, svc, id, ReplicationConfig{Bus: bus.Config{Cluster: "probe", HeartbeatInterval: time.Hour}}, nc)
		t.Cleanup(func() { _ = br.Close(); nc.Close() })
		return svc, nc.MaxPayload()
	}
	a, maxPayload := join("a", 1)
	register(t, a, "m", 2)
	seedIndex(t, a, indexShape{workers: 2, chains: 5, prefixBlocks: 2, tailBlocks: 4, bases: 2}, rand.New(rand.NewPCG(11, 11)))
	if err := a.ServeSnapshots(recovery.ServerOptions{}); err != nil {
		t.Fatal(err)
	}
	b, _ := join("b", 2)
	if m := b.repl.(*BusReplicator).r.Members(); len(m) != 0 {
		t.Fatalf("b already knows members %+v; the test needs a replica that heard no heartbeat", m)
	}
	st := b.Recover(context.Background(), RecoveryConfig{MaxChunk: recovery.ChunkLimit(maxPayload), DiscoveryWait: 0})
	if st.Source != "nats" || st.Peer != "a" || st.Error != "" {
		t.Fatalf("status %+v", st)
	}
	if got, want := semantic(t, dumpBytes(t, b)), semantic(t, dumpBytes(t, a)); !reflect.DeepEqual(got, want) {
		t.Fatalf("recovered %d facts, want %d", len(got), len(want))
	}
}
