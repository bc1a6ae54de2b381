package engine

import (
	"errors"
	"time"
)

// Router-queue admission (Dynamo's router_queue_threshold and policy classes; spec §5.6). With
// queueing configured, a non-advisory selection that finds every eligible rank busy under its
// policy class's rule (rqueue_policy.go; by default active prefill tokens above
// router_queue_threshold × max_num_batched_tokens) parks in the queue (rqueue.go) instead of
// failing, or is refused with 429 when its class's queue limit is reached, and is selected —
// with the loads and overlap of that moment — and, for select_and_reserve, booked as soon as a
// rank has room. Rules, as in Dynamo:
//
//   - No bypass: while a class has parked requests, a newcomer of that class parks behind them
//     even if a rank is free; dispatch serves them in queue order.
//   - Head of line: a class is dispatched from its head; deficit round robin picks among the
//     classes whose head finds a rank with room, until none does.
//   - Advisory requests never wait; a pinned request waits for its own rank only (its lane).
//   - There is no time limit: a request waits until it is dispatched, abandoned or failed.
//
// The engine decides; its owner waits. SelectQueued parks and returns a Ticket; every dispatch
// (and FailQueue) is an Admission in the outbox (Ready.Admitted), which the owner drains after
// the call and hands to the parked caller. The owner calls DrainQueue or DrainQueuePartition
// whenever load can have dropped or the candidates changed, and Abandon for a caller that went
// away.

// Ticket names a parked request; tickets are never reused.
type Ticket uint64

// Admission is a parked request's outcome: the selection (and booking) made when the queue
// dispatched it, or the error that ended its wait (Dispatched false: FailQueue). Parked is the
// time it parked.
type Admission struct {
	Ticket     Ticket
	Resp       *SelectResponse
	Err        error
	Parked     time.Time
	Dispatched bool
}

// queueState is the router queue and what admission keeps beside it: the policy classes and
// the selection ids of parked select_and_reserve requests.
type queueState struct {
	q         routerQueue
	pol       Policies
	parkedIDs map[string]struct{}
	keys      []PartitionKey // DrainQueue scratch
}

func newQueueState(cfg *Config, pol *Policies) queueState {
	qs := queueState{q: newRouterQueue(time.Time{}), parkedIDs: map[string]struct{}{}}
	if pol != nil {
		qs.pol = *pol
	}
	qs.pol.synthetic = syntheticProfile(cfg)
	return qs
}

// syntheticProfile is the single class of a configuration without policy classes.
func syntheticProfile(cfg *Config) *policyProfile {
	policy := cfg.QueuePolicy
	if policy == "" {
		policy = "fcfs"
	}
	c := &policyClass{name: "default", quantum: 1, policy: policy, busy: BusyRule{Frac: cfg.QueueThreshold}}
	return &policyProfile{classes: []*policyClass{c}, explicit: map[string]int{}}
}

// QueueLen is the number of parked requests.
func (e *Engine) QueueLen() int { return e.rq.q.n }

// QueueByClass counts the parked requests per policy class name (nil when none is parked).
func (e *Engine) QueueByClass() map[string]int { return e.rq.q.byClass() }

// ParkedIDs is the number of selection ids held by parked select_and_reserve requests (an
// invariant for tests: it equals the parked bookings that carry an id).
func (e *Engine) ParkedIDs() int { return len(e.rq.parkedIDs) }

// SelectQueued is Select (reserve: SelectAndReserve) under the router queue. When the request
// must wait it parks and SelectQueued returns its ticket (and no response); its outcome comes
// later as an Admission in the outbox — possibly from this very call, which dispatches the
// partition after parking (the newcomer may sort ahead of a head that cannot go). Errors:
// Select's, 429 when the class's queue limit is reached, 409 for a select_and_reserve whose
// selection_id is booked or parked.
func (e *Engine) SelectQueued(req *SelectRequest, reserve bool, now time.Time) (*SelectResponse, Ticket, error) {
	cl, err := e.classify(req)
	if err != nil {
		return nil, 0, err
	}
	req = cl.req
	if reserve && req.SelectionID != nil {
		if _, parked := e.rq.parkedIDs[*req.SelectionID]; parked {
			return nil, 0, conflictParked(*req.SelectionID)
		}
	}
	if !cl.prof.classes[cl.class].queues() || !e.QueueingApplies(req, reserve) {
		resp, err := e.selectNow(req, reserve, now)
		return resp, 0, err
	}
	if !e.rq.q.waiting(cl.part, cl.class, req.PinnedWorker) {
		resp, err := e.selectNow(req, reserve, now)
		if !errors.Is(err, ErrOverloaded) {
			return resp, 0, err
		}
	}
	w, err := e.park(cl, reserve, now)
	if err != nil {
		return nil, 0, err
	}
	e.DrainQueuePartition(cl.part, now)
	return nil, Ticket(w.seq), nil
}

// SelectClassified is Select (reserve: SelectAndReserve) under the busy rule of the request's
// policy class, never parking: 429 when every rank is busy. A select_and_reserve whose
// selection_id is parked is refused (409); an advisory select needs no class.
func (e *Engine) SelectClassified(req *SelectRequest, reserve bool, now time.Time) (*SelectResponse, error) {
	if reserve && req.SelectionID != nil {
		if _, parked := e.rq.parkedIDs[*req.SelectionID]; parked {
			return nil, conflictParked(*req.SelectionID)
		}
	}
	if !reserve && req.Advisory {
		return e.Select(req, now)
	}
	cl, err := e.classify(req)
	if err != nil {
		return nil, err
	}
	return e.selectNow(cl.req, reserve, now)
}

func conflictParked(id string) error {
	return &Error{Kind: ErrConflict, Msg: "selection " + id + " is already reserved or being reserved"}
}

// classified is a request with its policy class: req carries the class's busy rule (a shallow
// copy of the caller's request, unless the class is the synthetic one, whose rule is the
// engine's default); probe and prompt are set when classification needed them.
type classified struct {
	req    *SelectRequest
	part   PartitionKey
	prof   *policyProfile
	class  int
	probe  QueueProbe
	prompt parkedPrompt
	probed bool
}

// classify assigns req its policy class. Only classes that bucket by uncached tokens need the
// probe; its errors are the selection's own.
func (e *Engine) classify(req *SelectRequest) (classified, error) {
	cl := classified{part: PartitionKey{Model: deref(req.ModelName, DefaultName), Group: deref(req.RoutingGroup, DefaultName)}}
	cl.prof = e.rq.pol.forModel(cl.part.Model)
	var uncached uint64
	if _, explicit := cl.prof.explicit[req.PolicyClass]; !explicit && cl.prof.needsProbe() {
		probe, pp, err := e.probeQueue(req, nil)
		if err != nil {
			return cl, err
		}
		cl.probe, cl.prompt, cl.probed = probe, pp, true
		uncached = probe.ISL - min(probe.Cached, probe.ISL)
	}
	cl.class = cl.prof.classify(req.PolicyClass, uncached)
	cl.req = req
	if cl.prof != e.rq.pol.synthetic {
		// The engine's own rule is the synthetic class's; any other class brings its rule on a
		// copy of the request (the caller's stays untouched). Classes are immutable, so the copy
		// may point at the class's rule.
		r := *req
		r.Busy = &cl.prof.classes[cl.class].busy
		cl.req = &r
	}
	return cl, nil
}

// park measures a classified request and parks it, unless its class's queue limit is reached
// (429) or it is a select_and_reserve whose selection_id is booked or already parked (409, as
// a duplicate booking is refused).
func (e *Engine) park(cl classified, reserve bool, now time.Time) (*waiter, error) {
	if !cl.probed {
		probe, pp, err := e.probeQueue(cl.req, nil)
		if err != nil {
			return nil, err
		}
		cl.probe, cl.prompt = probe, pp
	}
	if err := e.rq.q.limitError(cl.part, cl.prof, cl.class, cl.probe); err != nil {
		return nil, err
	}
	req := cl.req
	if reserve && req.SelectionID != nil {
		id := *req.SelectionID
		if _, parked := e.rq.parkedIDs[id]; parked || e.HasReservation(id) {
			return nil, conflictParked(id)
		}
		e.rq.parkedIDs[id] = struct{}{}
	}
	w := e.rq.q.park(req, reserve, cl.prof, cl.class, cl.probe, now)
	w.prompt = cl.prompt
	return w, nil
}

// selectNow runs one immediate selection (and booking).
func (e *Engine) selectNow(req *SelectRequest, reserve bool, now time.Time) (*SelectResponse, error) {
	if !reserve {
		return e.Select(req, now)
	}
	return e.SelectAndReserve(req, now)
}

// DrainQueue dispatches parked requests in every partition, in key order (see
// DrainQueuePartition).
func (e *Engine) DrainQueue(now time.Time) {
	if e.rq.q.n == 0 {
		return
	}
	e.rq.keys = e.rq.q.partitions(e.rq.keys[:0])
	for _, k := range e.rq.keys {
		e.DrainQueuePartition(k, now)
	}
	clear(e.rq.keys)
}

// DrainQueuePartition dispatches partition k's parked requests — by round robin over its
// classes, then from its pinned lanes — until no head finds a rank with room; each becomes an
// Admission in the outbox. Each dispatch test is a probe of the head (a scoring pass over its
// stored prompt), so owners name the partition they touched when they know it.
func (e *Engine) DrainQueuePartition(k PartitionKey, now time.Time) {
	for w := e.nextParked(k); w != nil; w = e.nextParked(k) {
		e.leave(w)
		resp, err := e.selectNow(w.req, w.reserve, now)
		e.out.Admitted = append(e.out.Admitted, Admission{Ticket: Ticket(w.seq), Resp: resp, Err: err, Parked: w.parked, Dispatched: true})
	}
}

// nextParked is partition k's next request to dispatch: by round robin over its classes, then
// from its pinned lanes.
func (e *Engine) nextParked(k PartitionKey) *waiter {
	if e.rq.q.n == 0 {
		return nil
	}
	if w := e.rq.q.next(k, e.dispatchable); w != nil {
		return w
	}
	return e.rq.q.nextLane(k, e.dispatchable)
}

// dispatchable reports whether a parked request may be selected now: some rank it may use is
// not busy under its class's rule. A request whose selection would fail for another reason
// (its workers are gone) is dispatchable too, so that it gets that answer.
func (e *Engine) dispatchable(w *waiter) bool {
	probe, _, err := e.probeQueue(w.req, &w.prompt)
	return err != nil || !probe.Busy
}

// leave takes w out of the queue and its id out of the parked set.
func (e *Engine) leave(w *waiter) bool {
	if !e.rq.q.remove(w) {
		return false
	}
	if w.reserve && w.req.SelectionID != nil {
		delete(e.rq.parkedIDs, *w.req.SelectionID)
	}
	return true
}

// Abandon takes a parked request out of the queue for a caller that went away, and dispatches
// its partition (the requests behind it may go now). It reports false when the ticket is not
// parked: its Admission was already produced.
func (e *Engine) Abandon(t Ticket, now time.Time) bool {
	w := e.rq.q.tickets[t]
	if w == nil || !e.leave(w) {
		return false
	}
	e.DrainQueuePartition(w.part, now)
	return true
}

// FailQueue ends every parked request with err, in park order (service shutdown).
func (e *Engine) FailQueue(err error) {
	for _, w := range e.rq.q.all(nil) {
		e.leave(w)
		e.out.Admitted = append(e.out.Admitted, Admission{Ticket: Ticket(w.seq), Err: err, Parked: w.parked})
	}
}
