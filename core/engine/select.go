package engine

import (
	"maps"
	"slices"
	"time"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// scored is one candidate's selection inputs and cost: the public Candidate view plus the
// engine's bookkeeping.
type scored struct {
	Candidate
	w        *worker
	eligible bool
	// away marks an eligible candidate the default picker skips: kept from the request by the
	// kvselect policy's cache stickiness (kvselect_stick.go, markAway).
	away bool
	cost float64
	// entries is the number of blocks the rank holds in the index (the kvselect policy's
	// eviction term; filled only when that term is on), fillScale its candidate's.
	entries   int32
	fillScale float64
}

// selectScratch holds buffers reused by every selection (the engine is single-threaded).
type selectScratch struct {
	match  radix.Match
	prefix load.PrefixMatch
	loads  []load.RankLoad
	cands  []scored
	idx    []int
	stored []radix.StoredBlock
	ctx    SelectionContext
	picked []ScoredCandidate
	fast   fastScratch // the fast path's per-rank arrays (fast.go)
	// sel is the selection choose returns: valid until the next selection, like cands.
	sel selection
}

// selection is the outcome of one pick, before booking.
type selection struct {
	p       *partition
	norm    normalized
	w       weights
	pick    *scored
	cands   []scored // the scored candidates (scratch-backed; valid until the next selection)
	session string   // the session key when affinity routing applies
	fast    bool     // chosen by chooseFast: per-rank overlap is in the fast scratch
	elig    []bool   // fast path: the allowed_worker_ids mask (nil: every rank)
	stuck   bool     // the kvselect policy's cache stickiness kept a rank away (kvselect_stick.go)
}

// Select picks a worker without booking load (POST /select). With a selection_id, the booking
// inputs are cached so a later POST /reservations can replay them.
func (e *Engine) Select(req *SelectRequest, now time.Time) (*SelectResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	sel, err := e.choose(req, !req.Advisory, false, now)
	if err != nil {
		return nil, err
	}
	resp := e.response(sel, req.SelectionID)
	if req.Advisory {
		resp.WorkerLoad = e.workerLoad(sel)
	}
	if req.SelectionID != nil {
		e.pending.insert(now, &pendingSelection{
			key: sel.p.key, id: *req.SelectionID, owner: sel.pick.Owner,
			norm: sel.norm, effPrefill: resp.EffectivePrefillTokens,
			expectedOutput: req.ExpectedOutputTokens, trackPrefill: sel.w.trackPrefill,
			session: sel.session, quality: e.measureQuality(sel),
		})
	}
	return resp, nil
}

// SelectAndReserve picks a worker and books the request on it atomically
// (POST /select_and_reserve). The booking id is selection_id, or a random UUID when absent.
func (e *Engine) SelectAndReserve(req *SelectRequest, now time.Time) (*SelectResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	id := deref(req.SelectionID, "")
	if req.SelectionID == nil {
		id = newUUID(e.rng)
	}
	if _, taken := e.resv[id]; taken {
		return nil, conflict("selection %s is already reserved or being reserved", id)
	}
	sel, err := e.choose(req, true, true, now)
	if err != nil {
		return nil, err
	}
	o := sel.pick.Owner
	if err := e.checkDispatch(sel.p, sel.session, o, now); err != nil {
		return nil, err
	}
	resp := e.response(sel, &id)
	prefill := uint64(0)
	if sel.w.trackPrefill {
		prefill = resp.EffectivePrefillTokens
	}
	if err := e.book(sel.p, id, o, sel.norm, prefill, sel.w.trackPrefill, req.ExpectedOutputTokens, now); err != nil {
		return nil, err
	}
	if sel.session != "" {
		e.bindSession(sel.p, sel.session, o, now)
		e.resv[id].session = sel.session
	}
	resp.Booked = &Booked{SequenceHashes: toI64(sel.norm.seq), ISLTokens: sel.norm.isl, TrackPrefillTokens: sel.w.trackPrefill}
	resp.KVHint = e.kvHint(sel, id)
	e.noteQuality(sel)
	return resp, nil
}

// choose runs the selection pipeline up to the pick (spec §5.1 steps 1–8).
func (e *Engine) choose(req *SelectRequest, admission, booking bool, now time.Time) (*selection, error) {
	key := PartitionKey{Model: deref(req.ModelName, DefaultName), Group: deref(req.RoutingGroup, DefaultName)}
	p, err := e.readyPartition(key)
	if err != nil {
		return nil, err
	}
	p.expirePredicted(now)
	session, err := e.sessionKey(req)
	if err != nil {
		return nil, err
	}
	w := e.weightsFor(req.RouterConfigOverride)
	if _, kv := w.policy.(kvselectPolicy); kv {
		w.observePartition(p.tracker)
	}
	norm, err := e.normalize(p, &req.Prompt, w.assumeReuse, true)
	if err != nil {
		return nil, err
	}
	if e.fastEligible(p, req, session, w) {
		sel := &e.scratch.sel
		*sel = selection{p: p, norm: norm, w: w, session: session}
		admit := admission && e.admits(p, req)
		if err := e.chooseFast(sel, req.AllowedWorkerIDs, admit, e.busyRule(req), booking); err != nil {
			return nil, err
		}
		return sel, nil
	}
	cands := e.score(p, &norm, w)
	filter(cands, req)
	sel := &e.scratch.sel
	*sel = selection{p: p, norm: norm, w: w, cands: cands, session: session}
	var sctx *SelectionContext
	if e.scoring.active() {
		sctx = e.selectionContext(sel, req, booking)
		e.applyScorers(sctx, cands)
	}

	if pw := req.PinnedWorker; pw != nil {
		for i := range cands {
			if cands[i].Owner.Worker == *pw.WorkerID && cands[i].Owner.Rank == *pw.DPRank {
				if !cands[i].eligible {
					return nil, errorf(ErrNoEndpoints, "pinned worker %d (dp_rank %d) is not allowed for this request", *pw.WorkerID, *pw.DPRank)
				}
				// Admission looks at the pinned rank alone (Dynamo's pinned lane).
				if admission && e.admits(p, req) && e.busyRule(req).busy(cands[i].Load.ActivePrefillTokens, cands[i].w) {
					return nil, overloaded()
				}
				sel.pick = &cands[i]
				return sel, nil
			}
		}
		return nil, errorf(ErrNoEndpoints, "pinned worker %d (dp_rank %d) is not schedulable for %s", *pw.WorkerID, *pw.DPRank, key)
	}
	if admission && e.admits(p, req) {
		if err := e.admit(cands, e.busyRule(req)); err != nil {
			return nil, err
		}
	}
	if j := e.boundCandidate(p, session, cands); j >= 0 {
		sel.pick = &cands[j]
		return sel, nil
	}
	if at := req.AffinityTarget; at != nil {
		if i := bestOf(cands, func(s *scored) bool {
			return s.Owner.Worker == *at.WorkerID && (at.DPRank == nil || s.Owner.Rank == *at.DPRank)
		}); i >= 0 {
			sel.pick = &cands[i]
			return sel, nil
		}
	}
	var i int
	if e.scoring.Picker != nil {
		i = e.customPick(sctx, cands)
	} else {
		if _, kv := w.policy.(kvselectPolicy); kv {
			if s, ok := newStickiness(w.stickShare, &norm, p.blockSize); ok {
				sel.stuck = markAway(cands, s)
			}
		}
		i = e.pick(cands, w.temperature)
	}
	if i < 0 {
		return nil, errorf(ErrNoEndpoints, "no endpoints available to route work")
	}
	sel.pick = &cands[i]
	return sel, nil
}

// readyPartition returns the partition if it has a schedulable worker (503 otherwise).
func (e *Engine) readyPartition(key PartitionKey) (*partition, error) {
	p := e.parts[key]
	if p != nil && p.ready() {
		return p, nil
	}
	if e.SchedulableCount() == 0 {
		return nil, notReady("no schedulable workers are available")
	}
	return nil, notReady("no schedulable workers for %s", key)
}

// score fills the scratch candidate list with overlap, load and cost for every schedulable rank.
//
// Candidate i is the tracker's owner at ordinal i (partition.ordinalsValid), so overlap, booked
// prefix and load are read by position, as the fast path reads them (radix.MatchSlots,
// Tracker.ActivePrefixOrdinals, Tracker.CountersAt), and each record is written field by field
// (a composite literal per rank is built in memory and copied, which defeats store forwarding).
// Candidate.Worker is filled only when custom scoring is configured: nothing else reads it.
func (e *Engine) score(p *partition, n *normalized, w weights) []scored {
	if !p.ordinalsValid() {
		return e.scoreMerged(p, n, w)
	}
	s, f := &e.scratch, &e.scratch.fast
	nc := len(p.cands)
	ov := resize(f.ov, nc)
	clear(ov)
	f.ov = ov
	if len(n.block) > 0 {
		p.index.MatchSlots(n.block, &s.match, p.slotTable(), ov)
		if p.predicted != nil {
			p.predicted.mergeSlots(p, n.block, ov)
		}
	}
	booked := p.tracker.ActivePrefixOrdinals(n.seq, f.booked)
	f.booked = booked
	booked = booked[:nc]
	loads := resize(s.loads, nc)
	s.loads = loads
	cs := resize(s.cands, nc)
	s.cands = cs
	withInfo := e.scoring.active()
	ent := e.entriesOf(p, w)
	for i := range cs {
		l := &loads[i]
		l.Owner = p.owners[i]
		l.ActivePrefillTokens, l.ActiveBlocks, l.ActiveRequests, l.PendingPrefills, l.PrefillSquares = p.tracker.CountersAt(i)
		l.PrefillCross = p.tracker.CrossAt(i)
		l.Speed = p.tracker.SpeedAt(i)
		l.CacheHeat = p.tracker.CacheHeatAt(i)
		l.ContextTokens = p.tracker.ContextTokensAt(i)
		c, o, sc := &p.cands[i], &ov[i], &cs[i]
		sc.Owner = p.owners[i]
		sc.Worker = nil
		if withInfo {
			sc.Worker = c.w.info()
		}
		sc.DeviceBlocks, sc.HostExtBlocks, sc.DiskExtBlocks = o[0], o[1], o[2]+o[3]
		sc.BookedPrefixBlocks = int(booked[i])
		sc.Load = l
		sc.w, sc.eligible, sc.away, sc.cost = c.w, true, false, 0
		sc.entries, sc.fillScale = ent[i], c.fillScale
	}
	w.policy.costs(cs, *n, p.blockSize, w)
	return cs
}

// scoreMerged is score without trusting ordinals: loads fetched per owner, and the sorted
// Match and ActivePrefix answers merged by owner. It runs only if the partition invariant
// (the tracker holds exactly the candidates, in the same order) is ever found broken.
//
// p.cands, the tracker's owners, Match's owners and ActivePrefix's entries are all sorted by
// (worker, rank), so the joins are linear merges with no lookups.
func (e *Engine) scoreMerged(p *partition, n *normalized, w weights) []scored {
	s := &e.scratch
	cs := slices.Grow(s.cands[:0], len(p.cands))[:len(p.cands)]
	s.cands = cs
	s.loads = p.tracker.Loads(s.loads[:0])
	if !slices.EqualFunc(s.loads, p.owners, func(l load.RankLoad, o kvwire.Owner) bool { return l.Owner == o }) {
		// Invariant breach guard: fetch per owner rather than trust positions.
		s.loads = s.loads[:0]
		for i := range p.cands {
			s.loads = append(s.loads, p.tracker.Load(p.owners[i]))
		}
	}
	ent := e.entriesOf(p, w)
	for i := range p.cands {
		c := &p.cands[i]
		cs[i] = scored{Candidate: Candidate{Owner: p.owners[i], Worker: c.w.info(), Load: &s.loads[i]}, w: c.w, eligible: true, entries: ent[i], fillScale: c.fillScale}
	}
	if len(n.block) > 0 {
		j := 0
		for _, m := range p.matches(n.block, &s.match) {
			for j < len(cs) && cs[j].Owner.Compare(m.Owner) < 0 {
				j++
			}
			if j < len(cs) && cs[j].Owner == m.Owner {
				cs[j].DeviceBlocks, cs[j].HostExtBlocks, cs[j].DiskExtBlocks = m.Device, m.HostExt, m.DiskExt+m.ExternalExt
			}
		}
	}
	if len(n.seq) > 0 {
		p.tracker.ActivePrefix(n.seq, &s.prefix)
		j := 0
		for _, m := range s.prefix.Entries() {
			o := m.Owner
			for j < len(cs) && cs[j].Owner.Compare(o) < 0 {
				j++
			}
			if j < len(cs) && cs[j].Owner == o {
				cs[j].BookedPrefixBlocks = m.Blocks
			}
		}
	}
	w.policy.costs(cs, *n, p.blockSize, w)
	return cs
}

// findCand binary-searches the (worker, rank)-sorted candidate list.
func findCand(cs []scored, o kvwire.Owner) int {
	i, ok := slices.BinarySearchFunc(cs, o, func(s scored, o kvwire.Owner) int { return s.Owner.Compare(o) })
	if !ok {
		return -1
	}
	return i
}

// filter clears eligible for candidates excluded by allowed_worker_ids or required taints, and
// applies preferred-taint multipliers to costs.
func filter(cs []scored, req *SelectRequest) {
	var allowed map[uint64]struct{}
	if req.AllowedWorkerIDs != nil {
		allowed = make(map[uint64]struct{}, len(req.AllowedWorkerIDs))
		for _, id := range req.AllowedWorkerIDs {
			allowed[id] = struct{}{}
		}
	}
	rc := req.RoutingConstraints
	var prefOrder []string // rc.PreferredTaints' keys, sorted once per request
	if rc != nil && len(rc.PreferredTaints) > 0 {
		prefOrder = slices.Sorted(maps.Keys(rc.PreferredTaints))
	}
	for i := range cs {
		s := &cs[i]
		if allowed != nil {
			if _, ok := allowed[s.Owner.Worker]; !ok {
				s.eligible = false
				continue
			}
		}
		if rc == nil {
			continue
		}
		for _, t := range rc.RequiredTaints {
			if _, ok := s.w.taints[t]; !ok {
				s.eligible = false
				break
			}
		}
		if len(rc.PreferredTaints) > 0 {
			s.cost *= preferredTaintMultiplier(s.w.taints, rc.PreferredTaints, prefOrder)
		}
	}
}

// response builds the selection response for the picked candidate.
func (e *Engine) response(sel *selection, id *string) *SelectResponse {
	p, s := sel.p, sel.pick
	bs := uint64(p.blockSize)
	cached := cachedTokens(s, bs, sel.w)
	isl := sel.norm.isl
	resp := &SelectResponse{
		SelectionID:            id,
		ModelName:              p.key.Model,
		RoutingGroup:           p.key.Group,
		WorkerID:               s.Owner.Worker,
		DPRank:                 s.Owner.Rank,
		Endpoint:               s.w.endpoint(),
		BlockSize:              p.blockSize,
		Overlap:                overlapSummary(sel.cands, s.w, bs, p),
		EffectivePrefillTokens: isl - min(cached, isl),
	}
	nseq := uint64(len(sel.norm.seq))
	resp.PotentialDecodeBlocks = s.Load.ActiveBlocks + (nseq - uint64(s.BookedPrefixBlocks))
	if rb := sel.norm.requestBlocks(p.blockSize); rb > nseq {
		resp.PotentialDecodeBlocks += rb - nseq // the partial trailing block (variant (a))
	}
	if thr, total := e.cfg.DecodeBusyThreshold, s.w.spec.TotalKVBlocks; thr != nil && total != nil {
		resp.DecodeBusy = ptr(float64(resp.PotentialDecodeBlocks) > *thr*float64(*total))
	}
	return resp
}

// overlapSummary builds the Mooncake summary over every rank of w's DP range (p names the ranks).
func overlapSummary(cs []scored, w *worker, bs uint64, p *partition) OverlapSummary {
	sum := OverlapSummary{DP: make(map[string]uint64, w.dpSize())}
	next := -1 // where the next rank's candidate is expected (cs is sorted by (worker, rank))
	for r := w.startRank(); uint64(r) < uint64(w.startRank())+uint64(w.dpSize()); r++ {
		var dev, host, disk uint64
		o := kvwire.Owner{Worker: w.id, Rank: r}
		j := next
		if j < 0 || j >= len(cs) || cs[j].Owner != o {
			j = findCand(cs, o)
		}
		if j >= 0 {
			next = j + 1
			s := &cs[j]
			dev = uint64(s.DeviceBlocks) * bs
			host = dev + uint64(s.HostExtBlocks)*bs
			disk = host + uint64(s.DiskExtBlocks)*bs
		}
		sum.DP[p.rankName(r)] = dev
		sum.GPU, sum.CPU, sum.Disk = max(sum.GPU, dev), max(sum.CPU, host), max(sum.Disk, disk)
	}
	sum.LongestMatched = max(sum.GPU, sum.CPU, sum.Disk)
	return sum
}

// workerLoad is the advisory load snapshot of the chosen rank: its current prefill load, not
// including the probing request (Dynamo's SelectionWorkerLoad; an idle rank reports 0).
func (e *Engine) workerLoad(sel *selection) *WorkerLoad {
	s := sel.pick
	wl := &WorkerLoad{
		ActivePrefillTokens:  s.Load.ActivePrefillTokens,
		PrefillTokenCapacity: deref(s.w.spec.MaxNumBatchedTokens, DefaultPrefillCapacity),
		TotalKVBlocks:        s.w.spec.TotalKVBlocks,
	}
	if thr := e.cfg.PrefillBusyThreshold; thr != nil {
		wl.PrefillBusy = ptr(float64(wl.ActivePrefillTokens) > *thr*float64(wl.PrefillTokenCapacity))
	}
	return wl
}
