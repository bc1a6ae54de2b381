package core

import (
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/kvwire"
)

// Tests of replication_liveset.go: the reassembly and release rule against a real engine (no
// bus), and two Services over a real nats-server showing that a free lost in an outage is
// repaired after the reconnect and that announcements racing a stream of admissions and frees
// never release a live booking.

// liveSetRig is a Service holding bookings mirrored from peers, with a BusReplicator that is
// not connected to anything: applyLiveSet is called directly.
type liveSetRig struct {
	svc *Service
	br  *BusReplicator
}

func newLiveSetRig(t *testing.T) *liveSetRig {
	t.Helper()
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	svc, err := New(Config{Engine: cfg, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	for _, w := range []uint64{1, 2} {
		if _, err := svc.UpsertWorker(testWorker(w, 1)); err != nil {
			t.Fatal(err)
		}
	}
	br := &BusReplicator{svc: svc, log: slog.New(slog.DiscardHandler), ledger: ledger{},
		tomb: newTombstones(tombstoneCap), pendingSets: map[liveSetKey]*pendingLiveSet{}, asks: map[string]*resyncAsk{}}
	return &liveSetRig{svc: svc, br: br}
}

// mirror applies a peer's admission of id on worker w.
func (r *liveSetRig) mirror(t *testing.T, sender, id string, w uint64) {
	t.Helper()
	ev := &engine.ReplicaEvent{Partition: engine.PartitionKey{Model: engine.DefaultName, Group: engine.DefaultName},
		BlockSize: 4, RequestID: id, Owner: kvwire.Owner{Worker: w}, Sender: sender, Kind: engine.LifecycleAdd,
		Add: &engine.ReplicaAdd{TokenSequence: []uint64{uint64(len(id)), 7}, ISL: 8}}
	if !r.svc.ApplyReplica(ev) {
		t.Fatalf("mirroring %s from %s was refused", id, sender)
	}
}

// live returns the ids among want that are still booked.
func (r *liveSetRig) live(ids ...string) []string {
	r.svc.mu.Lock()
	defer r.svc.mu.Unlock()
	var out []string
	for _, id := range ids {
		if r.svc.eng.HasReservation(id) {
			out = append(out, id)
		}
	}
	return out
}

func chunk(sender string, set uint64, c, n uint32, ids ...string) *bus.LiveSet {
	return &bus.LiveSet{Sender: sender, Model: engine.DefaultName, Group: engine.DefaultName, SetID: set,
		Chunk: c, Chunks: n, IDs: ids}
}

func TestLiveSetReleasesUnlistedBookings(t *testing.T) {
	r := newLiveSetRig(t)
	all := []string{"a1", "a2", "a3", "b1"}
	r.mirror(t, "a", "a1", 1)
	r.mirror(t, "a", "a2", 2)
	r.mirror(t, "a", "a3", 1)
	r.mirror(t, "b", "b1", 1)

	// An incomplete set changes nothing; a duplicate chunk does not complete it.
	r.br.applyLiveSet(chunk("a", 1, 0, 2, "a1"))
	r.br.applyLiveSet(chunk("a", 1, 0, 2, "a1"))
	if got := r.live(all...); !slices.Equal(got, all) {
		t.Fatalf("incomplete set released %v", got)
	}
	// A chunk of a newer set restarts the reassembly: set 1's first chunk is forgotten.
	r.br.applyLiveSet(chunk("a", 2, 1, 2, "a2"))
	if got := r.live(all...); !slices.Equal(got, all) {
		t.Fatalf("a set mixing two ids released %v", got)
	}
	// Set 2 completes: a1 and a2 are listed, a3 is released; b's booking is not a's to judge.
	r.br.applyLiveSet(chunk("a", 2, 0, 2, "a1"))
	if got := r.live(all...); !slices.Equal(got, []string{"a1", "a2", "b1"}) {
		t.Fatalf("after a's set {a1,a2}: live %v", got)
	}
	// Another partition's set, or a set from an unrelated sender, releases nothing here.
	other := chunk("a", 3, 0, 1)
	other.Model = "other-model"
	r.br.applyLiveSet(other)
	r.br.applyLiveSet(chunk("c", 1, 0, 1))
	if got := r.live(all...); !slices.Equal(got, []string{"a1", "a2", "b1"}) {
		t.Fatalf("unrelated sets released %v", got)
	}
	// An empty set releases everything the sender had there.
	r.br.applyLiveSet(chunk("b", 9, 0, 1))
	if got := r.live(all...); !slices.Equal(got, []string{"a1", "a2"}) {
		t.Fatalf("after b's empty set: live %v", got)
	}
	st := r.br.liveSets
	if st.applied != 4 || st.freed != 2 {
		t.Fatalf("stats %+v, want 4 sets applied (a, other, c, b) and 2 bookings freed", st)
	}
	// A released id is tombstoned: a stale republished admission cannot bring it back.
	r.svc.mu.Lock()
	freed := r.br.tomb.freed("a3", time.Time{})
	r.svc.mu.Unlock()
	if !freed {
		t.Fatal("a released booking must be tombstoned")
	}
	// Oversized chunk counts are refused outright; single-chunk sets never wait in the
	// reassembly table, so a full table cannot block them.
	r.br.applyLiveSet(chunk("a", 4, 0, maxLiveSetChunks+1))
	if len(r.br.pendingSets) != 0 {
		t.Fatalf("pending sets %v", r.br.pendingSets)
	}
	for i := range DefaultMaxPendingLiveSets {
		p := chunk("a", 5, 0, 2)
		p.Model = fmt.Sprint("filler-", i)
		r.br.applyLiveSet(p)
	}
	if len(r.br.pendingSets) != DefaultMaxPendingLiveSets {
		t.Fatalf("%d pending sets, want the table full", len(r.br.pendingSets))
	}
	r.br.applyLiveSet(chunk("a", 6, 0, 1, "a1"))
	if got := r.live(all...); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("a single-chunk set with a full table: live %v", got)
	}
	r.svc.mu.Lock()
	r.br.dropPendingSets("a")
	r.svc.mu.Unlock()
	if len(r.br.pendingSets) != 0 {
		t.Fatalf("a departed peer's partial sets must go: %d left", len(r.br.pendingSets))
	}
}

// TestLiveSetRepairsFreeLostInOutage: a free made while NATS is down never reaches the peer;
// after the reconnect the owner's announcement makes the peer release the booking. The
// dead-peer interval is an hour: at the default (a few heartbeats) a long outage on a loaded
// machine expired the owner on the peer, which released all its bookings and took the
// republished ones back — the free repaired by the dead-peer rule, not the live set (seen once
// with two race suites in parallel: LiveSetFreed 0).
func TestLiveSetRepairsFreeLostInOutage(t *testing.T) {
	srv := natstest.RunServer(t)
	port := serverPort(t, srv)
	a := startReplicaWith(t, srv.ClientURL(), "a", noDeadPeer, "b")
	b := startReplicaWith(t, srv.ClientURL(), "b", noDeadPeer, "a")
	natstest.WaitInterestCount(t, srv, "kvselect.v1.resync.lifecycle", 2)
	book(t, a, "keep", 1)
	book(t, a, "lost", 2)
	book(t, b, "bs", 3)
	waitSameLoads(t, a, b)

	stopServer(t, srv, a, b)
	if err := a.svc.Free("lost"); err != nil {
		t.Fatal(err)
	}
	if got := activeRequests(b.svc); got != 3 {
		t.Fatalf("B during the outage: %d requests, want 3 (it cannot know)", got)
	}
	restartServer(t, port)
	waitSameLoads(t, a, b)
	if got := activeRequests(b.svc); got != 2 {
		t.Fatalf("B after the reconnect: %d requests, want 2 (keep, bs)", got)
	}
	if st := b.br.ResyncStats(); st.LiveSetFreed != 1 {
		t.Fatalf("B stats %+v: want the lost free repaired by a live set", st)
	}
	if st := a.br.ResyncStats(); st.LiveSetsAnnounced == 0 {
		t.Fatalf("A stats %+v: no live set announced", st)
	}
}

// TestLiveSetsNeverReleaseLiveBookings: frequent announcements racing a stream of admissions,
// prefill completions and frees on the owner never release a booking the owner still holds:
// the peer ends with exactly the owner's loads.
func TestLiveSetsNeverReleaseLiveBookings(t *testing.T) {
	srv := natstest.RunServer(t)
	fast := func(c *ReplicationConfig) { c.LiveSetInterval = 5 * time.Millisecond }
	a := startReplicaWith(t, srv.ClientURL(), "a", fast, "b")
	b := startReplicaWith(t, srv.ClientURL(), "b", fast, "a")
	natstest.WaitInterestCount(t, srv, "kvselect.v1.resync.lifecycle", 2)
	for i := range 300 {
		id := fmt.Sprintf("r%d", i)
		book(t, a, id, i)
		if i%3 == 0 {
			if err := a.svc.PrefillComplete(id); err != nil {
				t.Fatal(err)
			}
		}
		if i%2 == 1 {
			if err := a.svc.Free(fmt.Sprintf("r%d", i-1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Let a few more announcements cross, then compare.
	natstest.WaitFor(t, syncTimeout, func() error {
		if st := b.br.ResyncStats(); st.LiveSetsApplied < 20 {
			return fmt.Errorf("b applied %d sets", st.LiveSetsApplied)
		}
		return nil
	})
	waitSameLoads(t, a, b)
	if got, want := activeRequests(b.svc), activeRequests(a.svc); got != want || want != 150 {
		t.Fatalf("B has %d requests, A %d; want 150 on both", got, want)
	}
	if st := b.br.ResyncStats(); st.LiveSetFreed != 0 {
		t.Fatalf("B released %d live bookings", st.LiveSetFreed)
	}
}

// TestLiveSetRecoversMissedAdmission: an admission a peer could not apply (it did not know the
// worker yet) is recovered without any reconnect or join: the owner's live set lists it, the
// peer asks for a republish, and the owner republishes.
func TestLiveSetRecoversMissedAdmission(t *testing.T) {
	srv := natstest.RunServer(t)
	cfg := func(c *ReplicationConfig) {
		c.LiveSetInterval = 300 * time.Millisecond
		c.JoinResyncRepeat = -1
	}
	a := startReplicaWith(t, srv.ClientURL(), "a", cfg, "b")
	b := startReplicaWith(t, srv.ClientURL(), "b", cfg, "a")
	natstest.WaitInterestCount(t, srv, "kvselect.v1.resync.lifecycle", 2)
	natstest.WaitFor(t, syncTimeout, func() error { // the join passes are behind us
		if a.br.ResyncStats().Passes == 0 || b.br.ResyncStats().Passes == 0 {
			return fmt.Errorf("join passes pending")
		}
		return nil
	})
	if _, err := b.svc.DeleteWorker(1); err != nil {
		t.Fatal(err)
	}
	var refused atomic.Bool
	hook := func(ev *engine.ReplicaEvent, applied bool) {
		if ev.RequestID == "x" && ev.Kind == engine.LifecycleAdd && !applied {
			refused.Store(true)
		}
	}
	b.br.appliedHook.Store(&hook)
	if _, err := a.svc.Reserve(&ReservationRequest{SelectionID: ptr("x"), WorkerID: ptr(uint64(1)), DPRank: ptr(uint32(0)),
		Prompt: Prompt{SequenceHashes: []int64{1, 2}, ISLTokens: ptr(uint64(8))}, EffectivePrefillTokens: ptr(uint64(8))}); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, syncTimeout, func() error { // B received x and could not apply it
		if !refused.Load() {
			return fmt.Errorf("b has not refused x yet")
		}
		return nil
	})
	if _, err := b.svc.UpsertWorker(testWorker(1, 2)); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, natstest.ReadyTimeout, func() error {
		if got := activeRequests(b.svc); got != 1 {
			return fmt.Errorf("b has %d requests, want the missed one", got)
		}
		return nil
	})
	if st := b.br.ResyncStats(); st.ResyncRequestsSent == 0 || st.LiveSetMissing == 0 {
		t.Fatalf("b stats %+v: want a request for the missing admission", st)
	}
	if st := a.br.ResyncStats(); st.ResyncRequestsReceived == 0 {
		t.Fatalf("a stats %+v: no request received", st)
	}
}
