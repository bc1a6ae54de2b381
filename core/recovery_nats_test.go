package core

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/recovery"
)

// NATS recovery between real services over a real embedded nats-server on 127.0.0.1 (a random
// port). These live in core beside the resync tests so that one test binary links nats-server.

// natsReplica joins a KV-events-on service to the bus at url.
func natsReplica(t testing.TB, url, id string, seed uint64, peers ...string) (*Service, *nats.Conn) {
	t.Helper()
	svc := newKVService(t, seed)
	nc, err := bus.Connect(bus.ConnConfig{Name: id, URLs: url, NoEcho: true})
	if err != nil {
		t.Fatal(err)
	}
	br := joinBus(t, svc, id, ReplicationConfig{Bus: bus.Config{Cluster: "recovery", Peers: peers, HeartbeatInterval: 50 * time.Millisecond}}, nc)
	t.Cleanup(func() {
		_ = br.Close()
		nc.Close()
	})
	return svc, nc
}

// TestNATSRecoveryBetweenReplicas: B recovers A's index over NATS, in many chunks (a small
// chunk limit) and in few (the connection's real payload limit), and ends with A's index;
// selections on A keep flowing while the snapshot is served.
func TestNATSRecoveryBetweenReplicas(t *testing.T) {
	srv := natstest.RunServer(t)
	url := srv.ClientURL()
	a, _ := natsReplica(t, url, "a", 1)
	register(t, a, "m", 3)
	seedIndex(t, a, indexShape{workers: 3, chains: 20, prefixBlocks: 4, tailBlocks: 12, bases: 3}, rand.New(rand.NewPCG(5, 5)))
	if err := a.ServeSnapshots(recovery.ServerOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.ServeSnapshots(recovery.ServerOptions{}); err == nil {
		t.Fatal("second ServeSnapshots accepted")
	}
	want := semantic(t, dumpBytes(t, a))
	size := len(dumpBytes(t, a))

	for _, tc := range []struct {
		name     string
		maxChunk int
	}{{"small chunks", recovery.MinChunkBytes * 2}, {"payload limit", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			b, nc := natsReplica(t, url, "b-"+tc.name, 2, "a")
			chunk := tc.maxChunk
			if chunk == 0 {
				chunk = recovery.ChunkLimit(nc.MaxPayload())
			}
			if size <= chunk && tc.maxChunk != 0 {
				t.Fatalf("snapshot of %d bytes fits one %d-byte chunk; grow the index", size, chunk)
			}
			st := b.Recover(context.Background(), RecoveryConfig{NATS: NATSRecoveryAuto, MaxChunk: chunk})
			if st.Source != "nats" || st.Peer != "a" || st.Bytes != int64(size) || st.Error != "" {
				t.Fatalf("status %+v", st)
			}
			if got := semantic(t, dumpBytes(t, b)); !reflect.DeepEqual(got, want) {
				t.Fatalf("recovered %d facts, want %d", len(got), len(want))
			}
		})
	}
}

// TestNATSRecoveryLargerThanPayload: a snapshot larger than the server's max payload (1 MiB
// by default) travels in several chunks at the real limit.
func TestNATSRecoveryLargerThanPayload(t *testing.T) {
	srv := natstest.RunServer(t)
	a, nc := natsReplica(t, srv.ClientURL(), "a", 1)
	register(t, a, "m", 4)
	seedIndex(t, a, indexShape{workers: 4, chains: 60, prefixBlocks: 2, tailBlocks: 30, bases: 4}, rand.New(rand.NewPCG(6, 6)))
	if err := a.ServeSnapshots(recovery.ServerOptions{}); err != nil {
		t.Fatal(err)
	}
	size := len(dumpBytes(t, a))
	if int64(size) <= nc.MaxPayload() {
		t.Fatalf("snapshot %d bytes not above the %d payload limit", size, nc.MaxPayload())
	}
	b, _ := natsReplica(t, srv.ClientURL(), "b", 2, "a")
	st := b.Recover(context.Background(), RecoveryConfig{MaxChunk: recovery.ChunkLimit(nc.MaxPayload())})
	if st.Source != "nats" || st.Bytes != int64(size) {
		t.Fatalf("status %+v", st)
	}
	if got, want := semantic(t, dumpBytes(t, b)), semantic(t, dumpBytes(t, a)); !reflect.DeepEqual(got, want) {
		t.Fatalf("recovered %d facts, want %d", len(got), len(want))
	}
}

// TestNATSRecoveryAlone: a replica alone on the bus (no peers known, or a configured peer that
// is not serving snapshots) starts empty at once.
func TestNATSRecoveryAlone(t *testing.T) {
	srv := natstest.RunServer(t)
	for _, peers := range [][]string{nil, {"ghost"}} {
		c, nc := natsReplica(t, srv.ClientURL(), "c", 3, peers...)
		start := time.Now()
		st := c.Recover(context.Background(), RecoveryConfig{MaxChunk: recovery.ChunkLimit(nc.MaxPayload())})
		// Alone means no snapshot wait at all: far below the 30 s first-chunk timeout and the
		// 2 min fetch deadline, with room for a loaded machine.
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("peers %v: alone took %v", peers, d)
		}
		if st.Source != "none" || st.State != "done" || st.Error == "" {
			t.Fatalf("peers %v: status %+v", peers, st)
		}
		if r := c.Ready(); r.Recovery == nil || r.Recovery.State != "done" {
			t.Fatalf("readiness %+v", r.Recovery)
		}
	}
}

// TestNATSRecoveryDiscoversMembers: with no configured peer, a replica waits (up to
// DiscoveryWait) for heartbeats and recovers from the first live member it hears; a replica
// that is itself still recovering does not serve, so the newcomer skips it.
func TestNATSRecoveryDiscoversMembers(t *testing.T) {
	srv := natstest.RunServer(t)
	a, nc := natsReplica(t, srv.ClientURL(), "a", 1)
	register(t, a, "m", 1)
	seedIndex(t, a, indexShape{workers: 1, chains: 3, prefixBlocks: 1, tailBlocks: 3, bases: 1}, rand.New(rand.NewPCG(7, 7)))
	_, _ = natsReplica(t, srv.ClientURL(), "0-still-recovering", 9) // a member that serves nothing
	if err := a.ServeSnapshots(recovery.ServerOptions{}); err != nil {
		t.Fatal(err)
	}
	b, _ := natsReplica(t, srv.ClientURL(), "b", 2)
	st := b.Recover(context.Background(), RecoveryConfig{MaxChunk: recovery.ChunkLimit(nc.MaxPayload()), DiscoveryWait: 5 * time.Second})
	if st.Source != "nats" || st.Peer != "a" {
		t.Fatalf("status %+v", st)
	}
	if got, want := semantic(t, dumpBytes(t, b)), semantic(t, dumpBytes(t, a)); !reflect.DeepEqual(got, want) {
		t.Fatalf("recovered %d facts, want %d", len(got), len(want))
	}
}

// TestNATSRecoveryModes: HTTP peers take precedence in auto mode (NATS not asked); force asks
// NATS after the HTTP peers failed; off never asks.
func TestNATSRecoveryModes(t *testing.T) {
	srv := natstest.RunServer(t)
	a, nc := natsReplica(t, srv.ClientURL(), "a", 1)
	register(t, a, "m", 1)
	seedIndex(t, a, indexShape{workers: 1, chains: 2, prefixBlocks: 1, tailBlocks: 2, bases: 1}, rand.New(rand.NewPCG(8, 8)))
	if err := a.ServeSnapshots(recovery.ServerOptions{}); err != nil {
		t.Fatal(err)
	}
	chunk := recovery.ChunkLimit(nc.MaxPayload())
	dead := "http://127.0.0.1:1"
	for _, tc := range []struct {
		mode   NATSRecoveryMode
		peers  []string
		source string
	}{
		{NATSRecoveryAuto, []string{dead}, "none"},
		{NATSRecoveryForce, []string{dead}, "nats"},
		{NATSRecoveryOff, nil, "none"},
		{NATSRecoveryAuto, nil, "nats"},
	} {
		b, _ := natsReplica(t, srv.ClientURL(), "b-"+string(tc.mode), 2, "a")
		st := b.Recover(context.Background(), RecoveryConfig{HTTPPeers: tc.peers, NATS: tc.mode, MaxChunk: chunk, HTTPTimeout: time.Second})
		if st.Source != tc.source {
			t.Errorf("mode %s peers %v: source %q, want %q (%+v)", tc.mode, tc.peers, st.Source, tc.source, st)
		}
	}
}
