package core

import (
	"context"
	"time"

	"github.com/kvselect/kvselect/core/engine"
)

// The router queue (Dynamo's router_queue_threshold and policy classes; spec §5.6). The engine
// decides who parks, in what order and who goes next (engine.SelectQueued, rqueue*.go in
// core/engine); the Service only waits: a parked caller blocks on its channel until the engine's
// outbox carries its Admission (flushLocked hands it over), its ctx ends, or the service closes
// (503, "selection service is shutting down").
//
// Dispatch is attempted whenever load can have dropped or the candidates changed
// (prefill_complete, free, expiry, a peer's lifecycle event, a worker registered, patched or
// removed) and once a second as a safety net. There is no time limit.
//
// A caller that goes away while parked leaves nothing behind. One that goes away after its
// select_and_reserve was dispatched gets its booking freed (Dynamo frees it too), since nobody
// will ever send the request to the worker.
//
// Select and SelectAndReserve keep their immediate semantics (429 when every rank is busy);
// SelectWait and SelectAndReserveWait are the queueing variants the HTTP API uses.

// queueRecheck is the safety-net dispatch interval while requests are parked.
const queueRecheck = time.Second

// SelectWait is Select that waits in the router queue when queueing is configured and every
// eligible rank is busy. It returns ctx.Err() if ctx ends first.
func (s *Service) SelectWait(ctx context.Context, req *SelectRequest) (*SelectResponse, error) {
	return s.selectWait(ctx, req, false)
}

// SelectAndReserveWait is SelectAndReserve that waits in the router queue when queueing is
// configured and every eligible rank is busy. It returns ctx.Err() if ctx ends first; a booking
// made for a caller that is gone by then is freed.
func (s *Service) SelectAndReserveWait(ctx context.Context, req *SelectRequest) (*SelectResponse, error) {
	return s.selectWait(ctx, req, true)
}

// waiter is a parked caller: the engine's ticket and the channel its outcome arrives on
// (capacity 1, so flushLocked never blocks).
type waiter struct {
	ticket  engine.Ticket
	reserve bool
	done    chan engine.Admission
}

func (s *Service) selectWait(ctx context.Context, req *SelectRequest, reserve bool) (*SelectResponse, error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, errShuttingDown
	}
	resp, t, err := s.eng.SelectQueued(req, reserve, s.clock())
	var w *waiter
	if t != 0 {
		w = &waiter{ticket: t, reserve: reserve, done: make(chan engine.Admission, 1)}
		s.waiters[t] = w
	}
	s.flushLocked() // may already carry w's admission
	s.mu.Unlock()
	if w == nil {
		return resp, err
	}
	select {
	case a := <-w.done:
		if ctx.Err() != nil { // both were ready: nobody will use the outcome
			s.release(w, a)
			return nil, ctx.Err()
		}
		return a.Resp, a.Err
	case <-ctx.Done():
		return nil, s.abandon(w, ctx.Err())
	}
}

// drainLocked dispatches parked requests in every partition and hands out the outcomes. Called
// with mu held after anything that can lower load or change the candidates anywhere.
func (s *Service) drainLocked() {
	if s.closing || s.eng.QueueLen() == 0 {
		return
	}
	s.eng.DrainQueue(s.clock())
	s.flushLocked()
}

// drainPartLocked is drainLocked for partition k only: each dispatch test is a scoring pass of
// the head, so callers name the partition they touched when they know it.
func (s *Service) drainPartLocked(k engine.PartitionKey) {
	if s.closing || s.eng.QueueLen() == 0 {
		return
	}
	s.eng.DrainQueuePartition(k, s.clock())
	s.flushLocked()
}

// wakeLocked hands the admissions of the engine's outbox to their parked callers and counts
// them. Called by flushLocked with mu held.
func (s *Service) wakeLocked(as []engine.Admission) {
	now := s.clock()
	for _, a := range as {
		w := s.waiters[a.Ticket]
		delete(s.waiters, a.Ticket)
		if a.Dispatched {
			s.queueStats.dispatched++
			s.queueStats.waited += now.Sub(a.Parked)
			s.queueStats.hist.observe(now.Sub(a.Parked))
		}
		if w != nil {
			w.done <- a
		}
	}
}

// abandon handles a caller that went away: a parked request leaves the queue (which may let the
// requests behind it go); a dispatched select_and_reserve has its booking freed.
func (s *Service) abandon(w *waiter, cause error) error {
	s.mu.Lock()
	if s.eng.Abandon(w.ticket, s.clock()) {
		delete(s.waiters, w.ticket)
		s.queueStats.abandoned++
		s.flushLocked()
		s.mu.Unlock()
		return cause
	}
	s.mu.Unlock()
	// Dispatched under mu before this call took it: the outcome is already in the channel.
	s.release(w, <-w.done)
	return cause
}

// release frees the booking of a dispatched select_and_reserve whose caller is gone.
func (s *Service) release(w *waiter, a engine.Admission) {
	if a.Err == nil && w.reserve && a.Resp != nil && a.Resp.SelectionID != nil {
		if err := s.Free(*a.Resp.SelectionID); err == nil {
			s.log.Info("freed the booking of a caller that went away while queued", "selection_id", *a.Resp.SelectionID)
		}
	}
}

// failQueueLocked ends every parked request with err (service shutdown).
func (s *Service) failQueueLocked(err error) {
	s.eng.FailQueue(err)
	s.flushLocked()
}

// recheckQueue is the periodic safety-net dispatch.
func (s *Service) recheckQueue() {
	if s.queued.Load() == 0 {
		return
	}
	s.mu.Lock()
	s.drainLocked()
	s.mu.Unlock()
}

// queueGauge publishes the queue length for lock-free reads (recheckQueue, Stats).
func (s *Service) queueGauge() { s.queued.Store(int64(s.eng.QueueLen())) }

// queueCounters are the router queue's cumulative counters (guarded by mu).
type queueCounters struct {
	dispatched uint64        // parked requests selected (successfully or not)
	abandoned  uint64        // parked requests whose caller went away first
	waited     time.Duration // total time dispatched requests spent parked
	hist       waitHist      // distribution of those waits (queue_waithist.go)
}
