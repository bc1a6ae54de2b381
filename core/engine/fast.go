package engine

import (
	"cmp"
	"math/rand/v2"
	"slices"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// The selection fast path. Most selections carry no taint constraint, pin or affinity target,
// run at temperature 0, and the engine has no custom scorer: then the pipeline of choose (score →
// filter → scorers → overrides → pick) reduces to "cost of every rank, arg-min with random ties
// among the allowed ranks, unless a live session binding names one", and the per-candidate
// Candidate/scored records that the general path builds for scorers, pickers and overrides are
// never looked at except for the winner's worker.
//
// allowed_worker_ids become an eligibility mask; a live session binding whose rank is eligible
// wins outright, as in the general path, and then no tie-break is drawn.
//
// chooseFast computes exactly the same costs (the selection policy prices both paths; policy.go)
// from compact per-rank arrays instead:
//
//   - tiered overlap scattered by the index match (radix.MatchSlots) into one record per rank;
//   - booked prefix lengths written by the load tracker straight into a per-ordinal array
//     (Tracker.ActivePrefixOrdinals), with no sorted entry list and no merge;
//   - loads read in place from the tracker by ordinal (Tracker.CountersAt), never copied;
//
// and runs the default picker's reservoir sampling in the same pass, consuming the engine's
// random source in the same order and with the same bounds as pick does. Decisions
// are therefore identical to the general path for the same seed (TestFastPathDifferential runs
// both on random workloads and compares every cost, every decision and the rand stream).
//
// Only the chosen worker's ranks are turned into scored records (the response's overlap summary
// and advisory load read them); when a KV hint may be built, every rank is, since the hint looks
// for the best source among all ranks.
//
// Ordinals: candidate i of a partition is the tracker's owner at ordinal i (both sorted by
// (worker, rank), same set). rebuild checks this once; partition.ordinalsValid re-checks, in O(1),
// that no owner came or went since. When it fails the general path runs.

// fastScratch holds the fast path's per-rank arrays (reused across selections; the engine is
// single-threaded). All are indexed by candidate (= tracker ordinal).
type fastScratch struct {
	ov      []radix.Counts // tiered overlap: device, host, disk, external (blocks)
	booked  []uint32
	cost    []float64
	entries []int32         // blocks each rank holds in the index (kvselect policy's eviction term)
	elig    []bool          // allowed_worker_ids mask (allowedMask)
	away    []bool          // ranks cache stickiness keeps from the request (awayMask, kvselect_stick.go)
	loads   []load.RankLoad // loads of the materialised ranks only
	cands   []scored        // the chosen worker's ranks, or every rank when a KV hint may be built
	// disabled forces the general path (differential tests); hits counts fast selections.
	disabled bool
	hits     uint64
	// A policy's loop reads ov, booked and this selection's allowed mask (nil: all), writes cost
	// and offers each eligible rank's cost to pick when draw is set.
	mask []bool
	draw bool
	pick argmin
}

// fastEligible reports whether the request can take the fast path: nothing custom or
// request-specific may influence the choice beyond the built-in cost and default picker.
func (e *Engine) fastEligible(p *partition, req *SelectRequest, session string, w weights) bool {
	if e.scratch.fast.disabled || e.scoring.active() || req.PinnedWorker != nil || req.AffinityTarget != nil ||
		req.RoutingConstraints != nil || w.temperature > 0 {
		return false
	}
	return p.ordinalsValid()
}

// chooseFast is choose's tail for fast-eligible requests (see the top of this file). allowed is
// the request's allowed_worker_ids (nil: every rank is eligible); with admission, rule is the
// busy rule to apply. The error cases are those of the
// general path for such requests: admission (429), and no eligible rank (503).
func (e *Engine) chooseFast(sel *selection, allowed []uint64, admission bool, rule BusyRule, booking bool) error {
	p, n, w := sel.p, &sel.norm, sel.w
	f := &e.scratch.fast
	f.hits++
	nc := len(p.cands)
	elig := f.allowedMask(p, allowed)

	// Tiered overlap, scattered by the index straight into the per-rank array.
	ov := resize(f.ov, nc)
	clear(ov)
	f.ov = ov
	if len(n.block) > 0 {
		p.index.MatchSlots(n.block, &e.scratch.match, p.slotTable(), ov)
		if p.predicted != nil {
			p.predicted.mergeSlots(p, n.block, ov)
		}
	}
	booked := p.tracker.ActivePrefixOrdinals(n.seq, f.booked)[:nc]

	// Admission reads loads only, which nothing below changes: checking it first is the general
	// path's order as far as anything observable goes (no random draw happens before it).
	if admission {
		if err := e.admitFast(p, elig, rule); err != nil {
			return err
		}
	}

	// A live session binding wins outright when its rank is an eligible candidate; then nothing
	// is drawn. A binding whose rank is gone is dropped (boundCandidate's rules).
	bound := e.boundFast(p, sel.session, elig)

	// Cost of every rank, and the default picker fused into the same pass: pick's running
	// arg-min visits the ranks in the same order and draws at the same ties.
	f.cost = resize(f.cost, nc)
	f.booked, f.mask, f.draw, f.pick = booked, elig, bound < 0, argmin{best: bound, rng: e.rng}
	w.policy.fast(e, sel)
	if f.pick.best < 0 {
		return errorf(ErrNoEndpoints, "no endpoints available to route work")
	}
	e.materialize(sel, f.pick.best, elig, booking)
	return nil
}

// allowedMask marks the ranks of the allowed workers (filter's allowed_worker_ids rule): nil
// when allowed is nil (no filter), else one flag per candidate. Cost O(len(allowed) · log
// candidates) plus one clear.
func (f *fastScratch) allowedMask(p *partition, allowed []uint64) []bool {
	if allowed == nil {
		return nil
	}
	m := resize(f.elig, len(p.cands))
	f.elig = m
	clear(m)
	for _, id := range allowed {
		// A worker's ranks are contiguous in the (worker, rank)-sorted candidate list.
		i, _ := slices.BinarySearchFunc(p.owners, id, func(o kvwire.Owner, id uint64) int { return cmp.Compare(o.Worker, id) })
		for ; i < len(p.owners) && p.owners[i].Worker == id; i++ {
			m[i] = true
		}
	}
	return m
}

// boundFast is boundCandidate on the fast path: the candidate index of the session's bound rank,
// or -1 (no session, no binding, a bound rank that is not eligible, or a binding whose rank is no
// longer a candidate, which is deleted as boundCandidate deletes it).
func (e *Engine) boundFast(p *partition, session string, elig []bool) int {
	if session == "" {
		return -1
	}
	b, ok := p.sessions[session]
	if !ok {
		return -1
	}
	j, found := slices.BinarySearchFunc(p.owners, b.owner, kvwire.Owner.Compare)
	if !found {
		delete(p.sessions, session)
		return -1
	}
	if elig != nil && !elig[j] {
		return -1
	}
	return j
}

// admitFast is admit over the eligible ranks (elig nil: all): nil as soon as one is not busy, or
// when none is eligible.
func (e *Engine) admitFast(p *partition, elig []bool, rule BusyRule) error {
	var pc poolCount
	for i := range p.cands {
		if elig != nil && !elig[i] {
			continue
		}
		prefill, _, _, _, _ := p.tracker.CountersAt(i)
		if !pc.add(rule.busy(prefill, p.cands[i].w)) && rule.Ratio == nil {
			return nil // one rank with room is enough
		}
	}
	if rule.poolBusy(pc) {
		return overloaded()
	}
	return nil
}

// argmin is the temperature-0 rule of pick and of the fast path as a running state: the first
// strictly smaller cost takes over, and the k-th tie with the running best replaces it with
// probability 1/k (reservoir sampling, one rng.IntN(k) draw per tie). A NaN cost never wins
// unless it comes first. best is -1 until something is offered.
type argmin struct {
	best, ties int
	cost       float64
	rng        *rand.Rand
}

// offer takes cost c of candidate i. It is small enough to inline into the scoring loops; what
// changes the state — a new best (a few times per selection) or a tie's draw (rare) — is
// out of line in take. (The loops used to spell out an offer that did not inline;
// BenchmarkFastSteps/pick, 512 ranks, 8 interleaved runs: 1.81 → 0.41 µs, the policies' cost
// loops unchanged within noise.)
func (a *argmin) offer(i int, c float64) {
	if a.best < 0 || c <= a.cost {
		a.take(i, c)
	}
}

// take is offer for a cost that is not worse than the running best (or the first offered): a
// strictly smaller one (or the first) takes over, an equal one makes the k-th tie's draw.
//
//go:noinline
func (a *argmin) take(i int, c float64) {
	if a.best < 0 || c < a.cost {
		a.best, a.ties, a.cost = i, 1, c
		return
	}
	a.ties++
	if a.rng.IntN(a.ties) == 0 {
		a.best = i
	}
}

// materialize turns ranks into scored records for the rest of the pipeline: the chosen worker's
// ranks (response, advisory load, overlap summary), or every rank when a KV hint may be built for
// this booking. It sets sel.cands and sel.pick.
func (e *Engine) materialize(sel *selection, best int, elig []bool, booking bool) {
	p, f := sel.p, &e.scratch.fast
	bw := p.cands[best].w
	lo, hi := best, best+1
	if booking && e.cfg.UseKVEvents && len(sel.norm.block) > 0 && deref(bw.spec.RouterHintWorkerType, "") != "" {
		lo, hi = 0, len(p.cands)
	} else {
		for lo > 0 && p.cands[lo-1].w == bw {
			lo--
		}
		for hi < len(p.cands) && p.cands[hi].w == bw {
			hi++
		}
	}
	m := hi - lo
	loads := resize(f.loads, m)
	f.loads = loads
	cs := resize(f.cands, m)
	f.cands = cs
	for i := lo; i < hi; i++ {
		loads[i-lo] = p.tracker.LoadAt(i)
		o, c := &f.ov[i], p.cands[i]
		cs[i-lo] = scored{
			Candidate: Candidate{Owner: p.owners[i], DeviceBlocks: o[0], HostExtBlocks: o[1], DiskExtBlocks: o[2] + o[3],
				BookedPrefixBlocks: int(f.booked[i]), Load: &loads[i-lo]},
			w: c.w, eligible: elig == nil || elig[i], cost: f.cost[i],
		}
	}
	sel.cands = cs
	sel.pick = &cs[best-lo]
	sel.fast, sel.elig = true, elig
}

// resize returns s with length n, reusing its capacity (contents unspecified).
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, max(n, 2*cap(s)))
	}
	return s[:n]
}
