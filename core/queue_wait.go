package core

import (
	"context"
	"errors"
	"time"

	"github.com/kvselect/kvselect/core/engine"
)

// The router queue (Dynamo's router_queue_threshold and policy classes; spec §5.6). With
// queueing configured, a non-advisory selection that finds every eligible rank busy under its
// policy class's rule (policyclass.go; by default active prefill tokens above
// router_queue_threshold × max_num_batched_tokens) waits in the queue instead of failing, or is
// refused with 429 when its class's queue limit is reached, and is selected —
// with the loads and overlap of that moment — and, for select_and_reserve, booked as soon as a
// rank has room. Rules, as in Dynamo:
//
//   - No bypass: while a class has parked requests, a newcomer of that class parks behind them
//     even if a rank is free; dispatch serves them in queue order (queue.go).
//   - Head of line: a class is dispatched from its head; deficit round robin picks among the
//     classes whose head finds a rank with room, until none does.
//   - Dispatch is attempted whenever load can have dropped or the candidates changed
//     (prefill_complete, free, expiry, a peer's lifecycle event, a worker registered, patched
//     or removed) and once a second as a safety net.
//   - Advisory requests never wait; a pinned request waits for its own rank only (its lane).
//   - There is no time limit: a request waits until it is dispatched, its caller goes away
//     (ctx ends), or the service closes (503, "selection service is shutting down").
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

func (s *Service) selectWait(ctx context.Context, req *SelectRequest, reserve bool) (*SelectResponse, error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, errShuttingDown
	}
	cl, err := s.classifyLocked(req)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	req = cl.req
	if err := s.parkedConflict(req, reserve); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if !cl.queues() || !s.eng.QueueingApplies(req, reserve) {
		resp, err := s.selectLocked(req, reserve)
		s.mu.Unlock()
		return resp, err
	}
	if !s.q.waiting(cl.part, cl.class, req.PinnedWorker) {
		resp, err := s.selectLocked(req, reserve)
		if !errors.Is(err, engine.ErrOverloaded) {
			s.mu.Unlock()
			return resp, err
		}
	}
	w, err := s.parkLocked(cl, reserve)
	if err == nil {
		// The newcomer may sort ahead of a head that cannot go (a narrower allowed set, a
		// lower priority) while it can: dispatch now rather than at the next load change.
		s.drainPartLocked(cl.part)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case r := <-w.done:
		if ctx.Err() != nil { // both were ready: nobody will use the outcome
			s.release(w, r)
			return nil, ctx.Err()
		}
		return r.resp, r.err
	case <-ctx.Done():
		return nil, s.abandon(w, ctx.Err())
	}
}

// parkedConflict refuses (409) a select_and_reserve whose selection_id a parked request holds:
// it is "being reserved", as the engine says of a booked id.
func (s *Service) parkedConflict(req *SelectRequest, reserve bool) error {
	if !reserve || req.SelectionID == nil {
		return nil
	}
	if _, parked := s.parkedIDs[*req.SelectionID]; parked {
		return conflictParked(*req.SelectionID)
	}
	return nil
}

func conflictParked(id string) error {
	return &engine.Error{Kind: engine.ErrConflict, Msg: "selection " + id + " is already reserved or being reserved"}
}

// classified is a request with its policy class: req carries the class's busy rule (a shallow
// copy of the caller's request, unless the class is the synthetic one, whose rule is the
// engine's default); probe is set when classification needed it.
type classified struct {
	req    *SelectRequest
	part   engine.PartitionKey
	prof   *policyProfile
	class  int
	probe  engine.QueueProbe
	probed bool
}

func (c *classified) queues() bool { return c.prof.classes[c.class].queues() }

// classifyLocked assigns req its policy class (policyclass.go). Only classes that bucket by
// uncached tokens need the engine's probe; its errors are the selection's own.
func (s *Service) classifyLocked(req *SelectRequest) (classified, error) {
	cl := classified{part: partitionOf(req)}
	cl.prof = s.pol.forModel(cl.part.Model)
	var uncached uint64
	if _, explicit := cl.prof.explicit[req.PolicyClass]; !explicit && cl.prof.needsProbe() {
		probe, err := s.eng.ProbeQueue(req)
		if err != nil {
			return cl, err
		}
		cl.probe, cl.probed = probe, true
		uncached = probe.ISL - min(probe.Cached, probe.ISL)
	}
	cl.class = cl.prof.classify(req.PolicyClass, uncached)
	cl.req = req
	if cl.prof != s.pol.synthetic {
		// The engine's own rule is the synthetic class's; any other class brings its rule on a
		// copy of the request (the caller's stays untouched). Classes are immutable, so the copy
		// may point at the class's rule.
		r := *req
		r.Busy = &cl.prof.classes[cl.class].busy
		cl.req = &r
	}
	return cl, nil
}

// parkLocked measures a classified request and parks it, unless its class's queue limit is
// reached (429) or it is a select_and_reserve whose selection_id is booked or already parked
// (409, as the engine refuses a duplicate booking).
func (s *Service) parkLocked(cl classified, reserve bool) (*waiter, error) {
	if !cl.probed {
		probe, err := s.eng.ProbeQueue(cl.req)
		if err != nil {
			return nil, err
		}
		cl.probe = probe
	}
	if err := s.q.limitError(cl.part, cl.prof, cl.class, cl.probe); err != nil {
		return nil, err
	}
	req := cl.req
	if reserve && req.SelectionID != nil {
		id := *req.SelectionID
		if _, parked := s.parkedIDs[id]; parked || s.eng.HasReservation(id) {
			return nil, conflictParked(id)
		}
		s.parkedIDs[id] = struct{}{}
	}
	w := s.q.park(req, reserve, cl.prof, cl.class, cl.probe, s.clock())
	s.queueGauge()
	return w, nil
}

// selectLocked runs one immediate selection (and booking) under mu.
func (s *Service) selectLocked(req *SelectRequest, reserve bool) (*SelectResponse, error) {
	if !reserve {
		return s.eng.Select(req, s.clock())
	}
	resp, err := s.eng.SelectAndReserve(req, s.clock())
	s.flushLocked()
	return resp, err
}

// drainLocked dispatches parked requests in every partition (see drainPartLocked). Called with
// mu held after anything that can lower load or change the candidates anywhere.
func (s *Service) drainLocked() {
	if s.q.n == 0 || s.closing {
		return
	}
	s.drainKeys = s.q.partitions(s.drainKeys[:0])
	for _, k := range s.drainKeys {
		s.drainPartLocked(k)
	}
	clear(s.drainKeys)
}

// drainPartLocked dispatches partition k's parked requests — by round robin over its classes,
// then from its pinned lanes — until no head finds a rank with room. Called with mu held after
// anything that can lower k's load or change its candidates: each dispatch test is a probe of
// the head (a scoring pass), so callers name the partition they touched when they know it.
func (s *Service) drainPartLocked(k engine.PartitionKey) {
	if s.q.n == 0 || s.closing {
		return
	}
	for w := s.nextLocked(k); w != nil; w = s.nextLocked(k) {
		s.leaveLocked(w)
		resp, err := s.selectLocked(w.req, w.reserve)
		s.queueStats.dispatched++
		s.queueStats.waited += s.clock().Sub(w.parked)
		s.queueStats.hist.observe(s.clock().Sub(w.parked))
		w.done <- waitResult{resp, err}
	}
}

// nextLocked is partition k's next request to dispatch: by round robin over its classes, then
// from its pinned lanes.
func (s *Service) nextLocked(k engine.PartitionKey) *waiter {
	if w := s.q.next(k, s.dispatchable); w != nil {
		return w
	}
	return s.q.nextLane(k, s.dispatchable)
}

// dispatchable reports whether a parked request may be selected now: some rank it may use is
// not busy under its class's rule. A request whose selection would fail for another reason
// (its workers are gone) is dispatchable too, so that it gets that answer.
func (s *Service) dispatchable(w *waiter) bool {
	probe, err := s.eng.ProbeQueue(w.req)
	return err != nil || !probe.Busy
}

// leaveLocked takes w out of the queue and its id out of the parked set.
func (s *Service) leaveLocked(w *waiter) bool {
	if !s.q.remove(w) {
		return false
	}
	if w.reserve && w.req.SelectionID != nil {
		delete(s.parkedIDs, *w.req.SelectionID)
	}
	s.queueGauge()
	return true
}

// abandon handles a caller that went away: a parked request leaves the queue (which may let the
// requests behind it go); a dispatched select_and_reserve has its booking freed.
func (s *Service) abandon(w *waiter, cause error) error {
	s.mu.Lock()
	if s.leaveLocked(w) {
		s.queueStats.abandoned++
		s.drainPartLocked(w.part)
		s.mu.Unlock()
		return cause
	}
	s.mu.Unlock()
	// Dispatched under mu before this call took it: the outcome is already in the channel.
	s.release(w, <-w.done)
	return cause
}

// release frees the booking of a dispatched select_and_reserve whose caller is gone.
func (s *Service) release(w *waiter, r waitResult) {
	if r.err == nil && w.reserve && r.resp != nil && r.resp.SelectionID != nil {
		if err := s.Free(*r.resp.SelectionID); err == nil {
			s.log.Info("freed the booking of a caller that went away while queued", "selection_id", *r.resp.SelectionID)
		}
	}
}

// failQueueLocked ends every parked request with err (service shutdown).
func (s *Service) failQueueLocked(err error) {
	for _, w := range s.q.all(nil) {
		s.leaveLocked(w)
		w.done <- waitResult{nil, err}
	}
	s.queueGauge()
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
func (s *Service) queueGauge() { s.queued.Store(int64(s.q.n)) }

// queueCounters are the router queue's cumulative counters (guarded by mu).
type queueCounters struct {
	dispatched uint64        // parked requests selected (successfully or not)
	abandoned  uint64        // parked requests whose caller went away first
	waited     time.Duration // total time dispatched requests spent parked
	hist       waitHist      // distribution of those waits (queue_waithist.go)
}

// partitionOf is the partition a request names (Dynamo's defaults for absent names).
func partitionOf(req *SelectRequest) engine.PartitionKey {
	k := engine.PartitionKey{Model: engine.DefaultName, Group: engine.DefaultName}
	if req.ModelName != nil {
		k.Model = *req.ModelName
	}
	if req.RoutingGroup != nil {
		k.Group = *req.RoutingGroup
	}
	return k
}
