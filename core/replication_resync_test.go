package core

import (
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/core/engine"
)

// Tests of the anti-entropy rule in replication_resync.go: the ledger's bookkeeping against a
// naive model, and two or three Services over a real nats-server on 127.0.0.1 showing that a
// booking made during an outage reaches the peer after the reconnect, that repeated resyncs
// never double-count, and that a joining replica learns existing bookings.

const syncTimeout = 60 * time.Second // generous: a loaded CI machine (internal/poll.Generous)

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// testWorker is a complete single-rank worker spec (KV events are off in these tests).
func testWorker(id uint64, dpSize uint32) WorkerSpec {
	return WorkerSpec{
		WorkerID: ptr(id), Endpoint: ptr(fmt.Sprintf("http://w%d:8000", id)),
		BlockSize: ptr(uint32(4)), DataParallelSize: ptr(dpSize),
	}
}

// book admits one request with a distinct prompt on r and returns its id.
func book(t testing.TB, r *replica, id string, n int) {
	t.Helper()
	toks := make([]uint32, 16)
	for i := range toks {
		toks[i] = uint32(n*131 + i)
	}
	_, err := r.svc.SelectAndReserve(&SelectRequest{SelectionID: ptr(id), Prompt: Prompt{TokenIDs: toks}})
	if err != nil {
		t.Fatalf("book %s on %s: %v", id, r.id, err)
	}
}

// waitSameLoads polls until every replica reports the same /loads as want, and that has
// requests active.
func waitSameLoads(t testing.TB, want *replica, others ...*replica) {
	t.Helper()
	natstest.WaitFor(t, syncTimeout, func() error {
		w := want.svc.Loads("", "")
		for _, o := range others {
			if got := o.svc.Loads("", ""); !reflect.DeepEqual(got, w) {
				return fmt.Errorf("%s loads %+v, %s has %+v", o.id, got, want.id, w)
			}
		}
		return nil
	})
}

// activeRequests sums ActiveRequests over every rank.
func activeRequests(s *Service) uint64 {
	var n uint64
	for _, p := range s.Loads("", "") {
		for _, l := range p.Loads {
			n += l.ActiveRequests
		}
	}
	return n
}

// serverPort returns the client port of srv.
func serverPort(t testing.TB, srv *server.Server) int {
	t.Helper()
	_, p, err := net.SplitHostPort(srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// stopServer shuts the NATS server down and waits until every replica saw its connection drop.
func stopServer(t testing.TB, srv *server.Server, rs ...*replica) {
	t.Helper()
	natstest.Shutdown(srv)
	natstest.WaitFor(t, syncTimeout, func() error {
		for _, r := range rs {
			if r.nc.IsConnected() {
				return fmt.Errorf("%s still connected", r.id)
			}
		}
		return nil
	})
}

// restartServer starts a NATS server on port again (the replicas reconnect on their own).
func restartServer(t testing.TB, port int) {
	t.Helper()
	opts := natstest.DefaultOptions()
	opts.Port = port
	natstest.RunServerWithOptions(t, opts)
}

func TestResyncAfterOutage(t *testing.T) {
	srv := natstest.RunServer(t)
	url := srv.ClientURL()
	port := serverPort(t, srv)
	// The dead-peer rule off (an hour): at the default interval a long outage on a loaded
	// machine expires A on B, which then releases "before" and fails the count during the
	// outage — the resync, not the dead-peer rule, is under test here.
	a := startReplicaWith(t, url, "a", noDeadPeer, "b")
	b := startReplicaWith(t, url, "b", noDeadPeer, "a")
	natstest.WaitInterestCount(t, srv, "kvselect.v1.resync.lifecycle", 2)

	book(t, a, "before", 1)
	waitSameLoads(t, a, b)

	stopServer(t, srv, a, b)
	// Both keep serving from local state; A's admissions are lost on the wire.
	book(t, a, "during-1", 2)
	book(t, a, "during-2", 3)
	if err := a.svc.PrefillComplete("during-2"); err != nil {
		t.Fatal(err)
	}
	book(t, b, "during-b", 4)
	if got := activeRequests(a.svc); got != 3 {
		t.Fatalf("A active requests during outage = %d, want 3 (before, during-1, during-2)", got)
	}
	if got := activeRequests(b.svc); got != 2 {
		t.Fatalf("B active requests during outage = %d, want 2 (before, during-b)", got)
	}

	restartServer(t, port)
	// After the reconnect each side republishes its own bookings: both converge on 4 requests
	// with identical per-rank numbers (during-2's prefill already complete on both).
	waitSameLoads(t, a, b)
	if got := activeRequests(b.svc); got != 4 {
		t.Fatalf("B active requests after resync = %d, want 4", got)
	}
	st := a.br.ResyncStats()
	if st.Passes == 0 || st.Republished < 3 || st.Ledger != 3 {
		t.Fatalf("A resync stats %+v: want a pass republishing its 3 bookings", st)
	}

	// Lifecycle keeps flowing after the resync: frees propagate both ways.
	for _, id := range []string{"before", "during-1", "during-2"} {
		if err := a.svc.Free(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.svc.Free("during-b"); err != nil {
		t.Fatal(err)
	}
	waitSameLoads(t, a, b)
	if got := activeRequests(b.svc); got != 0 {
		t.Fatalf("B active requests after frees = %d, want 0", got)
	}
	if st := a.br.ResyncStats(); st.Ledger != 0 {
		t.Fatalf("A ledger holds %d entries after every booking was freed", st.Ledger)
	}
}

// TestResyncIsIdempotent: repeated republishing refreshes the mirrored rows instead of
// booking them again.
func TestResyncIsIdempotent(t *testing.T) {
	srv := natstest.RunServer(t)
	a := startReplica(t, srv.ClientURL(), "a", "b")
	b := startReplica(t, srv.ClientURL(), "b", "a")
	natstest.WaitInterestCount(t, srv, "kvselect.v1.resync.lifecycle", 2)
	for i := range 5 {
		book(t, a, fmt.Sprintf("r%d", i), i)
	}
	if err := a.svc.PrefillComplete("r0"); err != nil {
		t.Fatal(err)
	}
	waitSameLoads(t, a, b)
	want := b.svc.Loads("", "")
	for round := 1; round <= 3; round++ {
		before := a.br.ResyncStats().Passes
		a.br.Resync(0)
		natstest.WaitFor(t, syncTimeout, func() error {
			if st := a.br.ResyncStats(); st.Passes == before {
				return fmt.Errorf("pass %d not done: %+v", round, st)
			}
			return nil
		})
		// A free published after the pass is ordered behind its admissions, so once B has
		// applied it B has applied the whole pass.
		book(t, a, fmt.Sprintf("marker%d", round), 100+round)
		if err := a.svc.Free(fmt.Sprintf("marker%d", round)); err != nil {
			t.Fatal(err)
		}
		waitSameLoads(t, a, b)
		if got := b.svc.Loads("", ""); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: B loads changed by a resync: %+v, want %+v", round, got, want)
		}
	}
}

// TestResyncOnPeerJoin: a replica that starts after bookings exist learns them from its peer's
// republish on the join.
func TestResyncOnPeerJoin(t *testing.T) {
	srv := natstest.RunServer(t)
	a := startReplica(t, srv.ClientURL(), "a", "b", "c")
	for i := range 3 {
		book(t, a, fmt.Sprintf("early%d", i), i)
	}
	b := startReplica(t, srv.ClientURL(), "b", "a")
	waitSameLoads(t, a, b)
	if got := activeRequests(b.svc); got != 3 {
		t.Fatalf("late joiner B sees %d active requests, want 3", got)
	}
	// A replica that is not a peer of A (A lists b and c; d is unknown) gets nothing applied:
	// D does not list A as a peer.
	d := startReplica(t, srv.ClientURL(), "d")
	natstest.WaitFor(t, syncTimeout, func() error {
		for _, m := range d.br.Members() {
			if m.ID == "a" {
				return nil
			}
		}
		return fmt.Errorf("d has not seen a yet")
	})
	if got := activeRequests(d.svc); got != 0 {
		t.Fatalf("non-peer D applied %d of A's bookings", got)
	}
}

// TestResyncDropsBookingsOfDeletedWorkers: a booking removed by a worker deletion (no free
// event) is pruned from the ledger at the next pass instead of being republished.
func TestResyncDropsBookingsOfDeletedWorkers(t *testing.T) {
	srv := natstest.RunServer(t)
	a := startReplica(t, srv.ClientURL(), "a")
	// Pin bookings on worker 1 and worker 2.
	for i, w := range []uint64{1, 1, 2} {
		toks := []uint32{uint32(i), 1, 2, 3, 4, 5, 6, 7}
		_, err := a.svc.SelectAndReserve(&SelectRequest{SelectionID: ptr(fmt.Sprint("p", i)),
			Prompt: Prompt{TokenIDs: toks}, AllowedWorkerIDs: []uint64{w}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.svc.DeleteWorker(1); err != nil {
		t.Fatal(err)
	}
	a.br.Resync(0)
	natstest.WaitFor(t, syncTimeout, func() error {
		if st := a.br.ResyncStats(); st.Passes == 0 {
			return fmt.Errorf("no pass yet")
		}
		return nil
	})
	st := a.br.ResyncStats()
	if st.Pruned != 2 || st.Republished != 1 || st.Ledger != 1 {
		t.Fatalf("resync stats %+v: want 2 pruned (worker 1), 1 republished, 1 left", st)
	}
}

// TestResyncHonoursPeerLifecycle: a peer's prefill completion and free of one of A's bookings
// update A's ledger, so A's next republish does not resurrect the booking or its prefill.
func TestResyncHonoursPeerLifecycle(t *testing.T) {
	srv := natstest.RunServer(t)
	a := startReplica(t, srv.ClientURL(), "a", "b")
	b := startReplica(t, srv.ClientURL(), "b", "a")
	natstest.WaitInterestCount(t, srv, "kvselect.v1.resync.lifecycle", 2)
	book(t, a, "done-on-b", 1)
	book(t, a, "freed-on-b", 2)
	waitSameLoads(t, a, b)
	if err := b.svc.PrefillComplete("done-on-b"); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Free("freed-on-b"); err != nil {
		t.Fatal(err)
	}
	waitSameLoads(t, a, b)
	natstest.WaitFor(t, syncTimeout, func() error {
		if st := a.br.ResyncStats(); st.Ledger != 1 {
			return fmt.Errorf("A ledger has %d entries, want 1", st.Ledger)
		}
		return nil
	})
	want := b.svc.Loads("", "")
	a.br.Resync(0)
	natstest.WaitFor(t, syncTimeout, func() error {
		if st := a.br.ResyncStats(); st.Passes == 0 {
			return fmt.Errorf("no pass yet")
		}
		return nil
	})
	book(t, a, "marker", 9)
	if err := a.svc.Free("marker"); err != nil {
		t.Fatal(err)
	}
	waitSameLoads(t, a, b)
	if got := b.svc.Loads("", ""); !reflect.DeepEqual(got, want) {
		t.Fatalf("resync changed B: %+v, want %+v", got, want)
	}
}

// TestLedgerTable checks the ledger's bookkeeping rules one event at a time.
func TestLedgerTable(t *testing.T) {
	add := func(id string, prefill uint64) engine.ReplicaEvent {
		return engine.ReplicaEvent{RequestID: id, Kind: engine.LifecycleAdd,
			Add: &engine.ReplicaAdd{TokenSequence: []uint64{1, 2}, TrackPrefill: true, PrefillTokens: prefill}}
	}
	ev := func(id string, k engine.LifecycleKind) engine.ReplicaEvent {
		return engine.ReplicaEvent{RequestID: id, Kind: k}
	}
	type step struct {
		ev      engine.ReplicaEvent
		peer    bool
		applied bool
	}
	now := time.Unix(1000, 0)
	tests := []struct {
		name    string
		steps   []step
		want    map[string]uint64 // id -> prefill in the ledger
		pruneAt time.Time         // zero: no prune
	}{
		{"local add", []step{{ev: add("x", 7)}}, map[string]uint64{"x": 7}, time.Time{}},
		{"local prefill", []step{{ev: add("x", 7)}, {ev: ev("x", engine.LifecyclePrefillComplete)}}, map[string]uint64{"x": 0}, time.Time{}},
		{"local free", []step{{ev: add("x", 7)}, {ev: ev("x", engine.LifecycleFree)}}, map[string]uint64{}, time.Time{}},
		{"peer prefill of ours", []step{{ev: add("x", 7)}, {ev: ev("x", engine.LifecyclePrefillComplete), peer: true, applied: true}}, map[string]uint64{"x": 0}, time.Time{}},
		{"peer free of ours", []step{{ev: add("x", 7)}, {ev: ev("x", engine.LifecycleFree), peer: true, applied: true}}, map[string]uint64{}, time.Time{}},
		{"peer free not applied still clears", []step{{ev: add("x", 7)}, {ev: ev("x", engine.LifecycleFree), peer: true}}, map[string]uint64{}, time.Time{}},
		{"peer add takes the id", []step{{ev: add("x", 7)}, {ev: add("x", 3), peer: true, applied: true}}, map[string]uint64{}, time.Time{}},
		{"peer add dropped keeps ours", []step{{ev: add("x", 7)}, {ev: add("x", 3), peer: true}}, map[string]uint64{"x": 7}, time.Time{}},
		{"peer add of unknown id", []step{{ev: add("y", 3), peer: true, applied: true}}, map[string]uint64{}, time.Time{}},
		{"add without payload ignored", []step{{ev: ev("x", engine.LifecycleAdd)}}, map[string]uint64{}, time.Time{}},
		{"prune old", []step{{ev: add("x", 7)}}, map[string]uint64{}, now.Add(time.Second)},
		{"prune keeps young", []step{{ev: add("x", 7)}}, map[string]uint64{"x": 7}, now},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := ledger{}
			for _, s := range tc.steps {
				e := s.ev
				if s.peer {
					l.observePeer(&e, s.applied)
				} else {
					l.observeLocal(&e, now)
				}
			}
			if !tc.pruneAt.IsZero() {
				l.prune(tc.pruneAt)
			}
			got := map[string]uint64{}
			for id, e := range l {
				got[id] = e.add.PrefillTokens
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ledger %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLedgerCopiesAdmission: completing prefill in the ledger must not write through to the
// event the engine handed over (the bus may still be encoding it).
func TestLedgerCopiesAdmission(t *testing.T) {
	l := ledger{}
	ev := engine.ReplicaEvent{RequestID: "x", Kind: engine.LifecycleAdd, Sender: "peer",
		Add: &engine.ReplicaAdd{PrefillTokens: 5}}
	l.observeLocal(&ev, time.Unix(0, 0))
	l.prefillDone("x")
	if ev.Add.PrefillTokens != 5 {
		t.Fatalf("caller's event modified: prefill %d", ev.Add.PrefillTokens)
	}
	if got := l["x"].event(); got.Sender != "" || got.Kind != engine.LifecycleAdd || got.Add.PrefillTokens != 0 || got.RequestID != "x" {
		t.Fatalf("republished event %+v (add %+v): want an admission of x with no sender and prefill 0", got, got.Add)
	}
}

// TestResyncScheduling checks how requests coalesce into scheduled passes.
func TestResyncScheduling(t *testing.T) {
	tests := []struct {
		name   string
		delays []time.Duration
		want   int // scheduled passes
	}{
		{"one", []time.Duration{0}, 1},
		{"close requests merge", []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}, 1},
		{"join pass and its repeat", []time.Duration{DefaultJoinResyncDelay, DefaultJoinResyncDelay + JoinResyncRepeat}, 2},
		{"bounded", []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second}, maxScheduled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newResyncer(nil, 0, 0, 0)
			start := time.Now()
			for _, d := range tc.delays {
				r.request(d)
			}
			if len(r.due) != tc.want {
				t.Fatalf("%d passes scheduled, want %d: %v", len(r.due), tc.want, r.due)
			}
			// The last pass is never earlier than the latest request.
			latest := start.Add(slices.Max(tc.delays))
			if last := r.due[len(r.due)-1]; last.Before(latest) {
				t.Fatalf("last pass at %v, before the latest request %v", last, latest)
			}
			if !slices.IsSortedFunc(r.due, func(a, b time.Time) int { return a.Compare(b) }) {
				t.Fatalf("passes out of order: %v", r.due)
			}
			// next hands them out in order once due, and only then.
			if _, ready := r.next(start.Add(-time.Hour)); ready {
				t.Fatal("a pass was ready before its time")
			}
			n := 0
			for {
				if _, ready := r.next(start.Add(time.Hour)); !ready {
					break
				}
				n++
			}
			if n != tc.want {
				t.Fatalf("next handed out %d passes, want %d", n, tc.want)
			}
		})
	}
}

// TestReusedIDAfterFreeIsMirrored: a client may reuse a request id once its booking completed
// (ids need only be unique while in flight); the tombstone left by the first free must not make
// peers ignore the new booking (found in review).
func TestReusedIDAfterFreeIsMirrored(t *testing.T) {
	srv := natstest.RunServer(t)
	a := startReplica(t, srv.ClientURL(), "a", "b")
	b := startReplica(t, srv.ClientURL(), "b", "a")
	natstest.WaitInterestCount(t, srv, "kvselect.v1.resync.lifecycle", 2)
	book(t, a, "req-1", 1)
	waitSameLoads(t, a, b)
	if err := b.svc.Free("req-1"); err != nil { // freed through the other replica: B tombstones it
		t.Fatal(err)
	}
	natstest.WaitFor(t, syncTimeout, func() error {
		if n := activeRequests(a.svc); n != 0 {
			return fmt.Errorf("A still has %d requests", n)
		}
		return nil
	})
	book(t, a, "req-1", 2) // the same id, a new booking
	natstest.WaitFor(t, syncTimeout, func() error {
		if n := activeRequests(b.svc); n != 1 {
			return fmt.Errorf("B mirrors %d requests, want the reused id's new booking", n)
		}
		return nil
	})
	if err := b.svc.PrefillComplete("req-1"); err != nil {
		t.Fatalf("lifecycle call on B for the reused id: %v", err)
	}
}
