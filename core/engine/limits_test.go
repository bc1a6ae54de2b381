package engine

import (
	"fmt"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestBookingLimits: bookings beyond the per-worker, total and booked-block limits are refused
// with ErrTooManyBookings naming the flag; a refused booking changes nothing; frees make room;
// peer admissions over a limit are dropped and counted; the counters follow every path that
// ends a booking (free, expiry sweep, worker deletion).
func TestBookingLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Limits.MaxBookings, cfg.Limits.MaxBookingsPerWorker, cfg.Limits.MaxBookedBlocks = 5, 3, 40
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1))
	mustUpsert(t, e, spec(2))
	book := func(id string, w uint64, blocks int) error {
		_, err := e.Reserve(&ReservationRequest{SelectionID: ptr(id), WorkerID: ptr(w), Prompt: Prompt{TokenIDs: toks(len(id)*1000, blocks*4)}}, t0)
		return err
	}
	for i := range 3 {
		noErr(t, book(fmt.Sprint("a", i), 1, 1))
	}
	wantErr(t, book("a3", 1, 1), ErrTooManyBookings, "worker 1 has 3 live bookings", "limit is 3 per worker", "--max-bookings-per-worker")
	noErr(t, book("b0", 2, 1))
	wantErr(t, book("b1", 2, 40), ErrTooManyBookings, "limit is 40 (--max-booked-blocks)")
	noErr(t, book("b1", 2, 1))
	wantErr(t, book("b2", 2, 1), ErrTooManyBookings, "5 live bookings", "limit is 5 (--max-bookings)")
	if st := e.LimitStats(); st.Bookings != 5 || st.BookedBlocks != 5 || st.Counters.RejectedBookings != 2 || st.Counters.RejectedWorkerBooking != 1 {
		t.Fatalf("stats %+v", st)
	}
	// A peer admission over the total limit is dropped and counted.
	if e.ApplyReplica(&ReplicaEvent{Partition: defKey, BlockSize: 4, RequestID: "peer-1", Owner: kvwire.Owner{Worker: 2}, Kind: LifecycleAdd,
		Add: &ReplicaAdd{TokenSequence: []uint64{1}, ISL: 4}, Sender: "p"}, t0) {
		t.Fatal("peer admission over the limit applied")
	}
	if e.LimitStats().Counters.DroppedPeerBookings != 1 {
		t.Fatal("dropped peer admission not counted")
	}
	// Free, worker deletion and expiry all give room back.
	noErr(t, e.Free("a0"))
	noErr(t, book("b2", 2, 1))
	if _, err := e.DeleteWorker(2); err != nil {
		t.Fatal(err)
	}
	if st := e.LimitStats(); st.Bookings != 2 || st.BookedBlocks != 2 {
		t.Fatalf("after deleting worker 2: %+v", st)
	}
	e.Sweep(t0.Add(cfg.ActiveRequestExpiry + 1))
	if st := e.LimitStats(); st.Bookings != 0 || st.BookedBlocks != 0 || len(e.bounds.perWorker) != 0 {
		t.Fatalf("after expiry: %+v perWorker %v", st, e.bounds.perWorker)
	}
}

// TestCatalogLimits: a worker beyond MaxWorkers and a partition beyond MaxPartitions are
// refused with ErrTableFull naming the flag and change nothing; re-registering a known worker
// is always allowed; an emptied partition is reclaimed to make room.
func TestCatalogLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Limits.MaxWorkers, cfg.Limits.MaxPartitions = 3, 2
	e := newEngine(t, &cfg)
	mustUpsert(t, e, spec(1, inModel("m1", "g")))
	mustUpsert(t, e, spec(2, inModel("m2", "g")))
	_, err := e.UpsertWorker(spec(3, inModel("m3", "g")))
	wantErr(t, err, ErrTableFull, "2 partitions exist", "limit is 2 (--max-partitions)")
	mustUpsert(t, e, spec(3, inModel("m2", "g")))
	_, err = e.UpsertWorker(spec(4, inModel("m2", "g")))
	wantErr(t, err, ErrTableFull, "3 workers are registered", "limit is 3 (--max-workers)")
	mustUpsert(t, e, spec(3, inModel("m2", "g"))) // known worker: a re-registration
	if len(e.workers) != 3 || len(e.parts) != 2 {
		t.Fatalf("refusals changed the catalog: %d workers, %d partitions", len(e.workers), len(e.parts))
	}
	// m1 empties: its partition is reclaimed for m3.
	if _, err := e.DeleteWorker(1); err != nil {
		t.Fatal(err)
	}
	mustUpsert(t, e, spec(5, inModel("m3", "g")))
	if _, ok := e.parts[PartitionKey{"m1", "g"}]; ok || e.LimitStats().Counters.ReclaimedPartitions != 1 {
		t.Fatalf("empty partition not reclaimed: %v", e.LimitStats().Counters)
	}
	if st := e.LimitStats().Counters; st.RejectedWorkers != 1 || st.RejectedPartitions != 1 {
		t.Fatalf("counters %+v", st)
	}
}
