package core

import (
	"context"
	"time"

	"github.com/kvselect/kvselect/core/engine"
)

// Router-queue waiting. The engine decides who parks, in what order and who goes next
// (engine.SelectQueued; core/engine/rqueue*.go); the Service only waits: a parked caller blocks
// until flushLocked hands it its Admission, its ctx ends, or the service closes (503). Dispatch
// is attempted whenever load can have dropped or the candidates changed, and once a second as a
// safety net. A caller that goes away after its select_and_reserve was dispatched has its
// booking freed (Dynamo frees it too). Select and SelectAndReserve never wait (429 when every
// rank is busy); SelectWait and SelectAndReserveWait, which the HTTP API uses, do.

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

// drainLocked dispatches the parked requests of parts (none: every partition) and hands out the
// outcomes. Called with mu held after anything that can lower load or change the candidates;
// callers name the partition they touched when they know it (drainPartLocked).
func (s *Service) drainLocked(parts ...engine.PartitionKey) {
	if s.closing || s.eng.QueueLen() == 0 {
		return
	}
	s.eng.DrainQueue(s.clock(), parts...)
	s.flushLocked()
}

func (s *Service) drainPartLocked(k engine.PartitionKey) { s.drainLocked(k) }

// wakeLocked hands the outbox's admissions to their parked callers and counts them (flushLocked).
func (s *Service) wakeLocked(as []engine.Admission) {
	now := s.clock()
	for _, a := range as {
		w := s.waiters[a.Ticket]
		delete(s.waiters, a.Ticket)
		if a.Dispatched {
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
	s.mu.Lock()
	s.drainLocked()
	s.mu.Unlock()
}

// queueCounters are the router queue's cumulative counters (guarded by mu): hist counts the
// parked requests dispatched (selected successfully or not) and their waits.
type queueCounters struct {
	abandoned uint64   // parked requests whose caller went away first
	hist      waitHist // queue_waithist.go
}
