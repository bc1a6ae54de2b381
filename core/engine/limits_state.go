package engine

// boundState counts what the bounded tables hold and what their limits refused or evicted.
// It is engine state (guarded by the owner's lock like everything else).
type boundState struct {
	bookings     int            // live reservation rows
	bookedBlocks int64          // tracking hashes held by live rows
	perWorker    map[uint64]int // live rows per worker id (entries removed at zero)

	// Refusals and evictions, by limit (monotonic counters).
	RejectedTooLarge      uint64 // requests over MaxRequestTokens/MaxRequestHashes
	RejectedBookings      uint64 // bookings refused by MaxBookings/MaxBookedBlocks
	RejectedWorkerBooking uint64 // bookings refused by MaxBookingsPerWorker
	DroppedPeerBookings   uint64 // peer admissions dropped by a booking limit or out of range (tokens > MaxISLTokens)
	RejectedWorkers       uint64 // registrations refused by MaxWorkers
	RejectedPartitions    uint64 // registrations refused by MaxPartitions
	ReclaimedPartitions   uint64 // empty partitions deleted to make room under MaxPartitions
	IndexEvicted          uint64 // KV-index blocks evicted by a rank's budget
	ApproxPruned          uint64 // approximate-index entries pruned by ApproxMaxBlocks
	ApproxPrunes          uint64 // prune passes
	ApproxBacklogDropped  uint64 // booked blocks not recorded because the approximate backlog was full
}

// LimitStats is a snapshot of the bounded tables' sizes, limits and counters.
type LimitStats struct {
	Limits       Limits
	Bookings     int
	BookedBlocks int64
	Workers      int
	Partitions   int
	ApproxBlocks int // entries of every partition's approximate index
	Counters     boundState
}

// LimitStats returns the current sizes and counters.
func (e *Engine) LimitStats() LimitStats {
	st := LimitStats{Limits: e.lim, Bookings: e.bounds.bookings, BookedBlocks: e.bounds.bookedBlocks,
		Workers: len(e.workers), Partitions: len(e.parts), Counters: e.bounds}
	st.Counters.perWorker = nil
	for _, p := range e.parts {
		if p.approx != nil {
			st.ApproxBlocks += len(p.approx.deadline)
		}
	}
	return st
}

// putRow installs a reservation row and counts it (every insertion goes through here).
func (e *Engine) putRow(id string, r *reservation) {
	if old, ok := e.resv[id]; ok {
		e.uncount(old)
	}
	e.resv[id] = r
	e.bounds.bookings++
	e.bounds.bookedBlocks += int64(r.blocks)
	e.bounds.perWorker[r.owner.Worker]++
}

// delRow removes a reservation row and uncounts it (every removal goes through here).
func (e *Engine) delRow(id string) {
	if r, ok := e.resv[id]; ok {
		e.uncount(r)
		delete(e.resv, id)
	}
}

func (e *Engine) uncount(r *reservation) {
	e.bounds.bookings--
	e.bounds.bookedBlocks -= int64(r.blocks)
	if n := e.bounds.perWorker[r.owner.Worker] - 1; n > 0 {
		e.bounds.perWorker[r.owner.Worker] = n
	} else {
		delete(e.bounds.perWorker, r.owner.Worker)
	}
}

// admitBooking checks the booking limits for a new row of blocks hashes on worker (replacing
// no existing row).
func (e *Engine) admitBooking(worker uint64, blocks int) error {
	l := &e.lim
	if e.bounds.bookings >= l.MaxBookings {
		e.bounds.RejectedBookings++
		return tooManyBookings("%d live bookings: the limit is %d (--max-bookings); free bookings or retry later", e.bounds.bookings, l.MaxBookings)
	}
	if e.bounds.bookedBlocks+int64(blocks) > l.MaxBookedBlocks {
		e.bounds.RejectedBookings++
		return tooManyBookings("live bookings hold %d blocks: the limit is %d (--max-booked-blocks); free bookings or retry later", e.bounds.bookedBlocks, l.MaxBookedBlocks)
	}
	if n := e.bounds.perWorker[worker]; n >= l.MaxBookingsPerWorker {
		e.bounds.RejectedWorkerBooking++
		return tooManyBookings("worker %d has %d live bookings: the limit is %d per worker (--max-bookings-per-worker)", worker, n, l.MaxBookingsPerWorker)
	}
	return nil
}

// approxTarget is the entry count the approximate index is pruned down to.
func (e *Engine) approxTarget() int {
	if e.lim.ApproxMaxBlocks == unlimited {
		return unlimited
	}
	return int(float64(e.lim.ApproxMaxBlocks) * e.lim.ApproxPruneRatio)
}
