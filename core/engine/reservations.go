package engine

import (
	"errors"
	"slices"
	"time"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/kvwire"
)

// reservation is one row of the process-wide reservation index: selection_id → where its
// booking lives. Rows mirrored from peer replicas are indexed too, so lifecycle calls for a
// peer-booked id work on any replica.
//
// Invariant: a row exists iff the partition's tracker holds a booking with the same id.
type reservation struct {
	key      PartitionKey
	owner    kvwire.Owner
	fromPeer bool
	peer     string // the replica that booked it, for rows mirrored from peers
	session  string // the session whose lease this booking holds ("" = none)
	blocks   int    // tracking hashes the booking holds (booking limits, limits_state.go)
}

// ReservationRequest is the body of POST /reservations: the replay form (no worker_id) books
// what a /select with the same selection_id cached; the explicit form carries worker and prompt.
type ReservationRequest struct {
	ModelName    *string `json:"model_name,omitempty"`
	RoutingGroup *string `json:"routing_group,omitempty"`
	SelectionID  *string `json:"selection_id"`
	WorkerID     *uint64 `json:"worker_id,omitempty"`
	DPRank       *uint32 `json:"dp_rank,omitempty"`
	Prompt
	RouterConfigOverride   *ConfigOverride `json:"router_config_override,omitempty"`
	ExpectedOutputTokens   *uint32         `json:"expected_output_tokens,omitempty"`
	EffectivePrefillTokens *uint64         `json:"effective_prefill_tokens,omitempty"`
	TrackPrefillTokens     *bool           `json:"track_prefill_tokens,omitempty"`
}

// ReservationResponse is the 201 body of POST /reservations.
type ReservationResponse struct {
	SelectionID  string `json:"selection_id"`
	ModelName    string `json:"model_name"`
	RoutingGroup string `json:"routing_group"`
	WorkerID     uint64 `json:"worker_id"`
	DPRank       uint32 `json:"dp_rank"`
	Endpoint     string `json:"endpoint"`
}

// Reserve books a request after a /select (POST /reservations).
func (e *Engine) Reserve(req *ReservationRequest, now time.Time) (*ReservationResponse, error) {
	if req.SelectionID == nil {
		return nil, unprocessable("missing field `selection_id`")
	}
	if err := req.RouterConfigOverride.Validate(); err != nil {
		return nil, err
	}
	id := *req.SelectionID
	key := PartitionKey{Model: deref(req.ModelName, DefaultName), Group: deref(req.RoutingGroup, DefaultName)}
	if req.WorkerID == nil {
		return e.replay(key, id, now)
	}
	// Explicit form: discard any cached selection for this id first, so a later replay cannot
	// book stale state.
	e.pending.remove(key, id)
	if _, taken := e.resv[id]; taken {
		return nil, conflict("selection %s is already reserved or being reserved", id)
	}
	p, err := e.readyPartition(key)
	if err != nil {
		return nil, err
	}
	p.expirePredicted(now)
	o := kvwire.Owner{Worker: *req.WorkerID, Rank: deref(req.DPRank, 0)}
	w, ok := p.members[o.Worker]
	if !ok || !w.schedulable() {
		return nil, notFound("schedulable worker %d not found for %s", o.Worker, key)
	}
	if !w.hasRank(o.Rank) {
		return nil, notFound("schedulable worker %d (dp_rank %d) not found for %s", o.Worker, o.Rank, key)
	}
	wts := e.weightsFor(req.RouterConfigOverride)
	norm, err := e.normalize(p, &req.Prompt, wts.assumeReuse, false)
	if err != nil {
		return nil, err
	}
	track := req.EffectivePrefillTokens != nil || wts.trackPrefill
	if req.TrackPrefillTokens != nil {
		track = *req.TrackPrefillTokens
	}
	prefill := uint64(0)
	if ep := req.EffectivePrefillTokens; ep != nil {
		if *ep > norm.isl {
			return nil, badRequest("effective_prefill_tokens (%d) must not exceed isl_tokens (%d)", *ep, norm.isl)
		}
		prefill = *ep
	} else if track {
		// No hint: the whole prompt minus what the rank has cached.
		prefill = norm.isl - min(e.cachedOn(p, o, &norm), norm.isl)
	}
	if !track {
		prefill = 0
	}
	if err := e.book(p, id, o, norm, prefill, track, req.ExpectedOutputTokens, now); err != nil {
		return nil, err
	}
	return &ReservationResponse{SelectionID: id, ModelName: key.Model, RoutingGroup: key.Group, WorkerID: o.Worker, DPRank: o.Rank, Endpoint: w.endpoint()}, nil
}

// replay books a pending selection (the cached replay form).
func (e *Engine) replay(key PartitionKey, id string, now time.Time) (*ReservationResponse, error) {
	ps, gen := e.pending.peek(key, id, now)
	if ps == nil {
		return nil, notFound("no pending selection %s for %s (expired, already used, or never selected)", id, key)
	}
	if _, taken := e.resv[id]; taken {
		return nil, conflict("selection %s is already reserved or being reserved", id)
	}
	p, err := e.readyPartition(key)
	if err != nil {
		return nil, err // the entry stays: retryable
	}
	p.expirePredicted(now)
	w, ok := p.schedulableRank(ps.owner)
	if !ok {
		return nil, notFound("schedulable worker %d (dp_rank %d) not found for %s", ps.owner.Worker, ps.owner.Rank, key)
	}
	prefill := uint64(0)
	if ps.trackPrefill {
		prefill = ps.effPrefill
	}
	if err := e.checkDispatch(p, ps.session, ps.owner, now); err != nil {
		e.pending.consume(key, id, gen) // this selection is spent; a newer /select of the id survives
		return nil, err
	}
	if ps.session != "" && !e.hardSessions() {
		if b, ok := p.sessions[ps.session]; ok && b.owner != ps.owner && b.leases > 0 {
			e.pending.remove(key, id)
			return nil, badRequest("session %s is bound to worker %d (dp_rank %d), not the selected worker %d (dp_rank %d)",
				ps.session, b.owner.Worker, b.owner.Rank, ps.owner.Worker, ps.owner.Rank)
		}
	}
	if err := e.book(p, id, ps.owner, ps.norm, prefill, ps.trackPrefill, ps.expectedOutput, now); err != nil {
		return nil, err
	}
	if ps.session != "" {
		e.bindSession(p, ps.session, ps.owner, now)
		e.resv[id].session = ps.session
	}
	p.quality.add(ps.quality) // counted here, once: the /select booked nothing
	e.pending.consume(key, id, gen)
	return &ReservationResponse{SelectionID: id, ModelName: key.Model, RoutingGroup: key.Group, WorkerID: ps.owner.Worker, DPRank: ps.owner.Rank, Endpoint: w.endpoint()}, nil
}

// cachedOn is the effective cached tokens of one rank for a prompt.
func (e *Engine) cachedOn(p *partition, o kvwire.Owner, n *normalized) uint64 {
	if len(n.block) == 0 {
		return 0
	}
	for _, m := range p.matches(n.block, &e.scratch.match) {
		if m.Owner == o {
			s := scored{Candidate: Candidate{DeviceBlocks: m.Device, HostExtBlocks: m.HostExt, DiskExtBlocks: m.DiskExt + m.ExternalExt}}
			return cachedTokens(&s, uint64(p.blockSize), e.weightsFor(nil))
		}
	}
	return 0
}

// book admits a request on rank o: load accounting, the reservation row, the approximate index
// or the predicted side index (when bookings feed one) and the replicated admission event.
func (e *Engine) book(p *partition, id string, o kvwire.Owner, n normalized, prefill uint64, track bool, expOut *uint32, now time.Time) error {
	if err := e.admitBooking(o.Worker, len(n.seq)); err != nil {
		return err
	}
	err := p.tracker.Add(load.Booking{
		ID: id, Owner: o, Hashes: n.seq, PrefillTokens: prefill, ContextTokens: contextOf(uint64(n.isl), prefill),
		ExpectedOutputTokens: deref(expOut, 0), AdmittedAt: now.UnixNano(),
	})
	switch {
	case errors.Is(err, load.ErrDuplicate):
		return conflict("selection %s is already reserved or being reserved", id)
	case errors.Is(err, load.ErrUnknownOwner):
		return notFound("schedulable worker %d (dp_rank %d) not found for %s", o.Worker, o.Rank, p.key)
	case err != nil:
		return errorf(ErrInternal, "booking %s: %v", id, err)
	}
	e.putRow(id, &reservation{key: p.key, owner: o, blocks: len(n.seq)})
	if p.approx != nil && len(n.block) > 0 {
		e.enqueueApprox(p, o, n.block, now.UnixNano()+int64(e.cfg.TTL)) // in bounded steps (approx_steps.go)
	}
	if p.predicted != nil && len(n.block) > 0 {
		p.predicted.record(o, n.block, now.UnixNano()+int64(*e.cfg.PredictedTTL))
	}
	e.emit(ReplicaEvent{
		Partition: p.key, BlockSize: p.blockSize, RequestID: id, Owner: o, Kind: LifecycleAdd,
		Add: &ReplicaAdd{TokenSequence: n.seq, TrackPrefill: track, PrefillTokens: prefill, ExpectedOutputTokens: expOut, LoraName: n.lora, ISL: n.isl},
	})
	return nil
}

// lookup finds a booking's partition and row.
func (e *Engine) lookup(id string) (*partition, *reservation, error) {
	r, ok := e.resv[id]
	if !ok {
		return nil, nil, notFound("reservation %s not found", id)
	}
	p := e.parts[r.key]
	if p == nil {
		e.delRow(id)
		return nil, nil, notFound("reservation %s not found", id)
	}
	return p, r, nil
}

// PrefillComplete clears a booking's prefill load (replicated). Repeating it is harmless and
// republishes the completion. Untimed: it teaches no speed (PrefillCompleteAt does).
func (e *Engine) PrefillComplete(id string) error { return e.prefillComplete(id, 0, false) }

// prefillComplete is PrefillComplete, at unix-nano time now when timed.
func (e *Engine) prefillComplete(id string, now int64, timed bool) error {
	p, r, err := e.lookup(id)
	if err != nil {
		return err
	}
	if timed {
		err = p.tracker.PrefillCompleteAt(id, now)
	} else {
		err = p.tracker.PrefillComplete(id)
	}
	if err != nil {
		return notFound("reservation %s not found", id)
	}
	e.emit(ReplicaEvent{Partition: p.key, BlockSize: p.blockSize, RequestID: id, Owner: r.owner, Kind: LifecyclePrefillComplete})
	return nil
}

// OutputBlock records one generated block (local only, never replicated). decayFraction, when
// given, must lie in [0, 1].
func (e *Engine) OutputBlock(id string, decayFraction *float64) error {
	if f := decayFraction; f != nil && !(*f >= 0 && *f <= 1) {
		return badRequest("decay_fraction must be between 0.0 and 1.0")
	}
	p, _, err := e.lookup(id)
	if err != nil {
		return err
	}
	if err := p.tracker.OutputBlock(id, e.rng.Uint64(), deref(decayFraction, 0), decayFraction != nil); err != nil {
		return notFound("reservation %s not found", id)
	}
	return nil
}

// Free releases a booking (replicated).
func (e *Engine) Free(id string) error {
	p, r, err := e.lookup(id)
	if err != nil {
		return err
	}
	_ = p.tracker.Free(id)
	e.delRow(id)
	p.releaseSession(r.session)
	e.emit(ReplicaEvent{Partition: p.key, BlockSize: p.blockSize, RequestID: id, Owner: r.owner, Kind: LifecycleFree})
	return nil
}

// ApplyReplica mirrors a peer's lifecycle event into local accounting. Events for unknown
// partitions, workers or ranks, or with a block-size mismatch, are dropped (false). A peer
// admission replaces a stale local row of the same id.
func (e *Engine) ApplyReplica(ev *ReplicaEvent, now time.Time) bool {
	p := e.parts[ev.Partition]
	if p == nil || p.blockSize != ev.BlockSize {
		return false
	}
	switch ev.Kind {
	case LifecycleAdd:
		if ev.Add == nil {
			return false
		}
		if _, ok := p.schedulableRank(ev.Owner); !ok {
			return false
		}
		if old, ok := e.resv[ev.RequestID]; ok {
			e.dropRow(ev.RequestID, old)
		}
		if ev.Add.PrefillTokens > MaxISLTokens || uint64(ev.Add.ISL) > MaxISLTokens ||
			e.admitBooking(ev.Owner.Worker, len(ev.Add.TokenSequence)) != nil {
			// A local request can book neither (prompt.go): a peer's would only skew this
			// rank's load and speed learning.
			e.bounds.DroppedPeerBookings++
			return false
		}
		prefill := uint64(0)
		if ev.Add.TrackPrefill {
			prefill = ev.Add.PrefillTokens
		}
		if err := p.tracker.Add(load.Booking{
			ID: ev.RequestID, Owner: ev.Owner, Hashes: ev.Add.TokenSequence, PrefillTokens: prefill,
			ContextTokens:        contextOf(uint64(ev.Add.ISL), prefill),
			ExpectedOutputTokens: deref(ev.Add.ExpectedOutputTokens, 0), AdmittedAt: now.UnixNano(),
		}); err != nil {
			return false
		}
		e.putRow(ev.RequestID, &reservation{key: p.key, owner: ev.Owner, fromPeer: true, peer: ev.Sender, blocks: len(ev.Add.TokenSequence)})
		return true
	case LifecyclePrefillComplete:
		r, ok := e.resv[ev.RequestID]
		return ok && r.key == p.key && p.tracker.PrefillCompleteAt(ev.RequestID, now.UnixNano()) == nil
	case LifecycleFree:
		r, ok := e.resv[ev.RequestID]
		if !ok || r.key != p.key {
			return false
		}
		e.dropRow(ev.RequestID, r)
		return true
	}
	return false
}

// dropRow frees a booking and removes its reservation row, releasing its session lease. Every
// path that ends a booking goes through here (or Free, which also publishes), so a binding's
// leases always match its live bookings.
func (e *Engine) dropRow(id string, r *reservation) {
	if p := e.parts[r.key]; p != nil {
		_ = p.tracker.Free(id)
		p.releaseSession(r.session)
	}
	e.delRow(id)
}

// DropPeerExcept frees the bookings mirrored from peer sender in partition key whose ids are
// not in keep: the peer announced that keep is everything it holds there, so it freed the rest
// while its free events were lost. It returns the ids it freed, appended to dst in ascending
// order (the order they are freed in).
func (e *Engine) DropPeerExcept(sender string, key PartitionKey, keep map[string]struct{}, dst []string) []string {
	start := len(dst)
	for id, r := range e.resv {
		if !r.fromPeer || r.peer != sender || r.key != key {
			continue
		}
		if _, ok := keep[id]; !ok {
			dst = append(dst, id)
		}
	}
	e.dropSorted(dst[start:])
	return dst
}

// dropSorted sorts ids (rows of e.resv) and drops them in that order, so the tracker and the
// session leases change in an order that does not depend on map iteration.
func (e *Engine) dropSorted(ids []string) {
	slices.Sort(ids)
	for _, id := range ids {
		e.dropRow(id, e.resv[id])
	}
}

// DropPeer frees every booking mirrored from a peer replica (it restarted, so its earlier
// bookings will never see their lifecycle events). It returns how many were freed.
func (e *Engine) DropPeer(sender string) int {
	var ids []string
	for id, r := range e.resv {
		if r.fromPeer && r.peer == sender {
			ids = append(ids, id)
		}
	}
	e.dropSorted(ids)
	return len(ids)
}

// contextOf is the cached context before a booking's prefill tokens: the rest of its prompt of
// isl tokens (0 when isl is unknown or not above prefill; the whole prompt for a full hit or
// untracked prefill, which the cache heat counts), isl capped at MaxISLTokens, the bound a local
// request has (a peer's ReplicaAdd.ISL is not validated on the wire).
func contextOf(isl, prefill uint64) uint64 {
	isl = min(isl, MaxISLTokens)
	if isl <= prefill {
		return 0
	}
	return isl - prefill
}
