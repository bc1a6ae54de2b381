package engine

import "github.com/kvselect/kvselect/core/engine/load"

// QueueProbe is what the router queue (rqueue.go) needs to know about a request before it parks
// it: the prompt's length and the best effective cached prefix over the ranks the
// request may use, both in tokens. WSPT ordering weighs a parked request by its uncached work,
// ISL − Cached, sampled once when it is parked (Dynamo does the same).
type QueueProbe struct {
	Partition PartitionKey
	ISL       uint64
	Cached    uint64 // ≤ ISL
	// Busy: every rank the request may use is busy under its busy rule (req.Busy, or
	// router_queue_threshold), so a selection now would be refused; false when no rank is
	// eligible (the selection would fail with 503 instead). For a pinned request: its rank is
	// busy, and Cached is that rank's.
	Busy bool
	// Workers is how many workers the partition has (router-queue limits are per worker).
	Workers int
	// ServiceMS estimates the request's own service time, the prefill of its uncached tokens,
	// in milliseconds: the least, over the ranks it may use, of that rank's learned prefill
	// model (speed.go; the configured prior when learning is off or has nothing yet) applied
	// to ISL minus that rank's cached prefix. The aging order (rqueue.go) sets each
	// parked request's deadline from it. Never negative; 0 when no rank is eligible.
	ServiceMS float64
}

// ProbeQueue validates req exactly as Select does and measures it for the router queue. It
// changes nothing and draws no randomness, so probing never perturbs a later selection. Errors
// are Select's (400/422 validation, 503 no schedulable worker).
func (e *Engine) ProbeQueue(req *SelectRequest) (QueueProbe, error) {
	pr, _, err := e.probeQueue(req, nil)
	return pr, err
}

// parkedPrompt is a parked request's prompt, normalised when it parked for a partition of block
// size bs; it stays valid while the partition's block size does.
type parkedPrompt struct {
	norm normalized
	bs   uint32
}

// probeQueue is ProbeQueue that also returns the normalised prompt it measured. With parked set
// (the request's prompt normalised when it parked) it skips validation, and hashing while the
// block size is unchanged: the request passed both when it parked.
func (e *Engine) probeQueue(req *SelectRequest, parked *parkedPrompt) (QueueProbe, parkedPrompt, error) {
	if parked == nil {
		if err := req.Validate(); err != nil {
			return QueueProbe{}, parkedPrompt{}, err
		}
	}
	key := PartitionKey{Model: deref(req.ModelName, DefaultName), Group: deref(req.RoutingGroup, DefaultName)}
	p, err := e.readyPartition(key)
	if err != nil {
		return QueueProbe{}, parkedPrompt{}, err
	}
	if _, err := e.sessionKey(req); err != nil {
		return QueueProbe{}, parkedPrompt{}, err
	}
	w := e.weightsFor(req.RouterConfigOverride)
	var n normalized
	if parked != nil && parked.bs == p.blockSize {
		n = parked.norm
	} else if n, err = e.normalize(p, &req.Prompt, w.assumeReuse, true); err != nil {
		return QueueProbe{}, parkedPrompt{}, err
	}
	cands := e.score(p, &n, w)
	filter(cands, req)
	pr := QueueProbe{Partition: key, ISL: n.isl, Workers: len(p.members)}
	bs := uint64(p.blockSize)
	rule := e.busyRule(req)
	var pc poolCount
	pw := req.PinnedWorker
	prior := w.prior
	first := true
	for i := range cands {
		c := &cands[i]
		if !c.eligible || (pw != nil && (c.Owner.Worker != *pw.WorkerID || c.Owner.Rank != *pw.DPRank)) {
			continue // a pinned request is measured on its rank alone
		}
		cached := min(n.isl, cachedTokens(c, bs, w))
		pr.Cached = max(pr.Cached, cached)
		if ms := serviceMS(c.Load.Speed, prior, w.fixedSpeed, n.isl-cached); first || ms < pr.ServiceMS {
			pr.ServiceMS, first = ms, false
		}
		if pw != nil {
			pr.Busy = rule.busy(c.Load.ActivePrefillTokens, c.w) && e.admits(p, req)
			return pr, parkedPrompt{n, p.blockSize}, nil
		}
		pc.add(rule.busy(c.Load.ActivePrefillTokens, c.w))
	}
	pr.Busy = pw == nil && rule.poolBusy(pc) && e.admits(p, req)
	return pr, parkedPrompt{n, p.blockSize}, nil
}

// serviceMS is the prefill time of uncached tokens on a rank whose learned model is sp: sp's
// when it is usable and learning is on, prior's otherwise; never negative. It leaves out the
// attention to cached context (SpeedModel.K): the aging order compares parked requests by the
// work only they need, and every request's cached prefix is read on whichever rank serves it.
func serviceMS(sp, prior load.SpeedModel, fixed bool, uncached uint64) float64 {
	if fixed || !sp.Valid() {
		sp = prior
	}
	ms := sp.MS(float64(uncached))
	if !(ms > 0) { // NaN or a non-positive prior
		return 0
	}
	return ms
}

// QueueingApplies reports whether the router queue may hold req: queueing is configured and the
// request is not advisory. A pinned request waits for its own rank only.
func (e *Engine) QueueingApplies(req *SelectRequest, booking bool) bool {
	return e.queueing(req) && (booking || !req.Advisory)
}

// HasReservation reports whether id is a live booking (local or mirrored from a peer).
func (e *Engine) HasReservation(id string) bool {
	_, ok := e.resv[id]
	return ok
}

// ReservationPartition returns the partition of live booking id.
func (e *Engine) ReservationPartition(id string) (PartitionKey, bool) {
	r, ok := e.resv[id]
	if !ok {
		return PartitionKey{}, false
	}
	return r.key, true
}
