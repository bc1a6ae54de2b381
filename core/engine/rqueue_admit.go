package engine

import (
	"cmp"
	"errors"
	"time"
)

// Router-queue admission (Dynamo's router_queue_threshold and policy classes; spec §5.6). With
// queueing configured, a non-advisory selection that finds every rank it may use busy under its
// policy class's rule (rqueue_policy.go) parks (rqueue.go) instead of failing — 429 when its
// class's queue limit is reached — and is selected, and for select_and_reserve booked, with the
// loads and overlap of the moment a rank has room. As in Dynamo: no bypass (a newcomer parks
// behind its class's parked requests), head of line per class with deficit round robin across
// classes, advisory requests never wait, a pinned request waits for its own rank (its lane),
// and there is no time limit.
//
// The engine decides; its owner waits. SelectQueued returns a Ticket when it parks; every
// dispatch (and FailQueue) is an Admission in the outbox (Ready.Admitted). The owner calls
// DrainQueue whenever load can have dropped or the candidates changed,
// and Abandon for a caller that went away.

// Ticket names a parked request; tickets are never reused.
type Ticket uint64

// Admission is a parked request's outcome: the selection (and booking) made when it was
// dispatched, or the error that ended its wait (Dispatched false: FailQueue).
type Admission struct {
	Ticket     Ticket
	Resp       *SelectResponse
	Err        error
	Parked     time.Time
	Dispatched bool
}

// syntheticProfile is the single class of a configuration without policy classes.
func syntheticProfile(cfg *Config) *policyProfile {
	c := &policyClass{name: "default", quantum: 1, policy: cmp.Or(cfg.QueuePolicy, "fcfs"), busy: BusyRule{Frac: cfg.QueueThreshold}}
	return &policyProfile{classes: []*policyClass{c}, explicit: map[string]int{}}
}

// QueueLen is the number of parked requests.
func (e *Engine) QueueLen() int { return len(e.rq.tickets) }

// QueueByClass counts the parked requests per policy class name (nil when none is parked).
func (e *Engine) QueueByClass() map[string]int { return e.rq.byClass() }

// ParkedIDs is the number of selection ids parked select_and_reserve requests hold.
func (e *Engine) ParkedIDs() int { return len(e.rq.parkedIDs) }

// SelectQueued is Select (reserve: SelectAndReserve) under the router queue. A request that must
// wait parks and gets a ticket; its Admission may come from this very call, which dispatches the
// partition after parking (the newcomer may sort ahead of a head that cannot go). Errors:
// Select's, 429 at the class's queue limit, 409 for a booked or parked selection_id.
func (e *Engine) SelectQueued(req *SelectRequest, reserve bool, now time.Time) (*SelectResponse, Ticket, error) {
	cl, err := e.classify(req)
	if err != nil {
		return nil, 0, err
	}
	req = cl.req
	if err := e.parkedConflict(req, reserve); err != nil {
		return nil, 0, err
	}
	if !cl.prof.classes[cl.class].queues() || !e.QueueingApplies(req, reserve) {
		resp, err := e.selectNow(req, reserve, now)
		return resp, 0, err
	}
	if !e.rq.waiting(cl.part, cl.class, req.PinnedWorker) {
		resp, err := e.selectNow(req, reserve, now)
		if !errors.Is(err, ErrOverloaded) {
			return resp, 0, err
		}
	}
	w, err := e.park(cl, reserve, now)
	if err != nil {
		return nil, 0, err
	}
	e.DrainQueue(now, cl.part)
	return nil, Ticket(w.seq), nil
}

// SelectClassified is Select (reserve: SelectAndReserve) under the busy rule of the request's
// policy class, never parking: 429 when every rank is busy. A select_and_reserve whose
// selection_id is parked is refused (409); an advisory select needs no class.
func (e *Engine) SelectClassified(req *SelectRequest, reserve bool, now time.Time) (*SelectResponse, error) {
	if err := e.parkedConflict(req, reserve); err != nil {
		return nil, err
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

// parkedConflict refuses (409) a select_and_reserve whose selection_id a parked request holds:
// it is "being reserved", as a booked id is.
func (e *Engine) parkedConflict(req *SelectRequest, reserve bool) error {
	if !reserve || req.SelectionID == nil {
		return nil
	}
	if _, parked := e.rq.parkedIDs[*req.SelectionID]; parked {
		return conflictParked(*req.SelectionID)
	}
	return nil
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
	cl.prof = e.pol.forModel(cl.part.Model)
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
	if cl.prof != e.pol.synthetic {
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
	if err := e.rq.limitError(cl.part, cl.prof, cl.class, cl.probe); err != nil {
		return nil, err
	}
	req := cl.req
	if reserve && req.SelectionID != nil {
		id := *req.SelectionID
		if _, parked := e.rq.parkedIDs[id]; parked || e.HasReservation(id) {
			return nil, conflictParked(id)
		}
	}
	w := e.rq.park(req, reserve, cl.prof, cl.class, cl.probe, now)
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

// DrainQueue dispatches the parked requests of parts (none: every partition, in key order) until
// no head finds a rank with room; each becomes an Admission in the outbox. A dispatch test is a
// scoring pass over a head's stored prompt, so owners name the partitions they touched.
func (e *Engine) DrainQueue(now time.Time, parts ...PartitionKey) {
	if len(parts) == 0 {
		e.rq.keys = e.rq.partitions(e.rq.keys[:0])
		parts = e.rq.keys
	}
	for _, k := range parts {
		for w := e.nextParked(k); w != nil; w = e.nextParked(k) {
			e.rq.remove(w)
			resp, err := e.selectNow(w.req, w.reserve, now)
			e.out.Admitted = append(e.out.Admitted, Admission{Ticket: Ticket(w.seq), Resp: resp, Err: err, Parked: w.parked, Dispatched: true})
		}
	}
}

// nextParked is partition k's next request to dispatch: by round robin over its classes, then
// from its pinned lanes.
func (e *Engine) nextParked(k PartitionKey) *waiter {
	if w := e.rq.next(k, e.dispatchable); w != nil {
		return w
	}
	return e.rq.nextLane(k, e.dispatchable)
}

// dispatchable reports whether a parked request may be selected now: some rank it may use is
// not busy under its class's rule, or its selection would fail otherwise (it gets that answer).
func (e *Engine) dispatchable(w *waiter) bool {
	probe, _, err := e.probeQueue(w.req, &w.prompt)
	return err != nil || !probe.Busy
}

// Abandon takes a parked request out for a caller that went away and dispatches its partition
// (the requests behind it may go now); false when it is not parked (its Admission is out).
func (e *Engine) Abandon(t Ticket, now time.Time) bool {
	w := e.rq.tickets[t]
	if w == nil || !e.rq.remove(w) {
		return false
	}
	e.DrainQueue(now, w.part)
	return true
}

// FailQueue ends every parked request with err, in park order (service shutdown).
func (e *Engine) FailQueue(err error) {
	for _, w := range e.rq.all(nil) {
		e.rq.remove(w)
		e.out.Admitted = append(e.out.Admitted, Admission{Ticket: Ticket(w.seq), Err: err, Parked: w.parked})
	}
}
