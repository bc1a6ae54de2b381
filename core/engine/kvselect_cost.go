package engine

import (
	"math"

	"github.com/kvselect/kvselect/core/engine/load"
)

// kvselect's cost function. Dynamo's formula (cost.go) adds queued prefill blocks, the request's
// uncached blocks and the rank's active KV blocks; replaying the Mooncake traces shows it trades
// too much cache affinity for KV-block balance, and it counts queued prefill linearly although
// prefill time grows quadratically with prompt length. kvselect's policy instead estimates, in
// milliseconds, when this request's first token would come out on each rank, and subtracts the
// value of keeping its cached prefix where it already is:
//
//	prefill_ms(t) = A·t² + B·t + C                                   (per prompt, t uncached tokens)
//	queue_ms      = A·Σ pending_i² + B·Σ pending_i + C·n_pending      (prefills booked, not complete)
//	cached        = cached tokens on the rank, counting the leading blocks booked there by live
//	                requests (they are cached or being computed, their KV events not yet in)
//	cost          = queue_ms + prefill_ms(isl − cached)
//	                − affinity·B·cached / (1 + queue_ms/affinity_queue_ms)
//	                + request_w·active_requests
//
// The affinity term is the future value of locality: a conversation kept on the rank that holds
// its prefix keeps hitting there, while moving it duplicates the prefix and evicts others. The
// discount lets a heavily queued rank lose that pull, which bounds the tail latency pure
// affinity causes (requests piling up behind a long prefill).
//
// The defaults (affinity 30, queue scale 2000 ms) come from replaying the Mooncake traces through
// kvselect-sim (README, "Routing quality"). The two weights trade prefix reuse against the TTFT
// tail: the requests that set p99 are long prompts, and a stronger or less discounted pull keeps
// more of them waiting behind a busy rank that holds part of their prefix. Affinity 60 with a
// 3000 ms scale reused 0.5–1.4 points more of the conversation trace but lost the p99 to
// Dynamo's formula at four times the trace's rate; 30 and 2000 ms keep reuse above 90 % of what
// one fleet-sized cache could reach and have the lowest p50, p99 and mean of every policy
// simulated, on both Mooncake traces, at two and four times the trace's rate, with each of five
// seeds.
// With affinity 0 the policy is a pure earliest-first-token estimate. Lower-tier blocks count with
// the host/disk hit weights, as in Dynamo's overlap credit.

// kvselectCosts computes the kvselect policy's cost for every candidate in place.
func kvselectCosts(cs []scored, n *normalized, blockSize uint32, w weights) {
	k := newKVSelectTerms(n, blockSize, w)
	for i := range cs {
		k.observeSpeed(cs[i].Load.Speed)
		k.observeEntries(cs[i].entries)
	}
	k.settleSpeed()
	for i := range cs {
		l := cs[i].Load
		k.observe(l.Speed, l.ActivePrefillTokens, l.PrefillSquares, l.PendingPrefills)
	}
	k.settle(len(cs))
	for i := range cs {
		s := &cs[i]
		s.cost = k.scoredCost(s)
	}
}

// scoredCost is cost for a scored candidate (its indexed blocks and worker's capacity known).
func (k *kvselectTerms) scoredCost(s *scored) float64 {
	l := s.Load
	var capacity uint64
	if s.w != nil {
		capacity = s.w.kvCapacity()
	}
	return k.costOf(s.DeviceBlocks, s.HostExtBlocks, s.DiskExtBlocks, s.BookedPrefixBlocks, s.entries, capacity, l.Speed,
		l.ActivePrefillTokens, l.PrefillSquares, l.PendingPrefills, l.ActiveRequests)
}

// speedDeadband is the relative speed difference below which ranks are priced alike (speed).
const speedDeadband = 2

// kvselectTerms holds the per-selection invariants of the kvselect policy; cost evaluates one
// rank. The fast path (fast.go) and kvselectCosts share it, so both compute bit-identical costs.
//
// Three passes: observeSpeed once per rank finds the fastest rank and settleSpeed closes that
// pass; observe once per rank finds the fleet's shortest queue and mean pending count and
// settle closes it; cost then prices each rank. Invariant: observe only after settleSpeed,
// cost only after settle.
type kvselectTerms struct {
	w   weights
	bs  float64
	isl float64
	// fleet pass: the smallest queue (ms), the total pending prefills; minQueue, beta after
	// settle.
	minQueue float64
	pending  int
	beta     float64
	// minB is the smallest per-token cost among the ranks; norm = modelB/minB after settle (see
	// speed).
	minB, norm float64
	// maxEntries is the most blocks any rank holds in the index (observeEntries).
	maxEntries int32
}

func newKVSelectTerms(n *normalized, blockSize uint32, w weights) kvselectTerms {
	return kvselectTerms{w: w, bs: float64(blockSize), isl: float64(n.isl), minQueue: math.Inf(1), minB: math.Inf(1), norm: 1}
}

// speed is the model the cost uses for a rank whose learned (or prior) model is sp, before
// normalisation: sp itself, or the configured model when learning is off or sp is unknown.
//
// Learned speeds enter relative to the fastest rank: after the fleet pass every model is scaled
// by norm = PrefillModelB / (smallest per-token cost), so the fastest rank is priced at the
// configured prior and a rank learned twice as slow at twice that. The absolute scale stays the
// one AffinityQueueMS is calibrated against, and what the estimator cannot tell apart from a
// slower worker — booked uncached tokens that differ from what workers really computed, the
// same way on every rank — does not shift every price at once.
//
// Speeds within speedDeadband of the fastest rank's are priced as the fastest's. In simulation
// a rank whose cache thrashes learns a per-token cost up to ~30 % above the truth (its booked
// uncached tokens undercount what it really recomputes); pricing that as slowness sends its
// traffic elsewhere, which thrashes those caches in turn — a feedback loop that collapsed an
// overloaded agentic workload. A genuinely slower worker (another GPU type, a shared GPU, a
// larger model) differs by far more than the band.
func (k *kvselectTerms) speed(sp load.SpeedModel) load.SpeedModel {
	if k.w.fixedSpeed || !(sp.B > 0) {
		return load.SpeedModel{A: k.w.modelA, B: k.w.modelB, C: k.w.modelC}
	}
	return sp
}

// queueMS is a rank's booked, not yet completed prefill work in its own speed model.
func queueMS(sp load.SpeedModel, prefill, squares uint64, pending int) float64 {
	return float64(sp.A*float64(squares)) + float64(sp.B*float64(prefill)) + float64(sp.C*float64(pending))
}

// observeSpeed is the first fleet pass for one rank: the fastest rank's per-token cost.
func (k *kvselectTerms) observeSpeed(sp load.SpeedModel) { k.minB = min(k.minB, k.speed(sp).B) }

// settleSpeed ends the first fleet pass.
func (k *kvselectTerms) settleSpeed() {
	if k.minB > 0 && !math.IsInf(k.minB, 1) && k.w.modelB > 0 {
		k.norm = k.w.modelB / k.minB
	}
}

// price is the model a rank is priced with after the first pass (see speed): the prior exactly
// within the dead band of the fastest rank, else its speed normalised to the fastest's.
func (k *kvselectTerms) price(sp load.SpeedModel) load.SpeedModel {
	sp = k.speed(sp)
	if b := k.w.modelB; sp.B < speedDeadband*b && sp.B*speedDeadband > b {
		return load.SpeedModel{A: k.w.modelA, B: k.w.modelB, C: k.w.modelC}
	}
	return sp
}

// observeEntries is part of the first fleet pass: the rank's indexed blocks.
func (k *kvselectTerms) observeEntries(n int32) { k.maxEntries = max(k.maxEntries, n) }

// observe is the second fleet pass for one rank.
func (k *kvselectTerms) observe(sp load.SpeedModel, prefill, squares uint64, pending int) {
	k.minQueue = min(k.minQueue, queueMS(k.price(sp), prefill, squares, pending))
	k.pending += pending
}

// settle ends the second fleet pass, over n ranks.
func (k *kvselectTerms) settle(n int) {
	if n == 0 || math.IsInf(k.minQueue, 1) {
		k.minQueue = 0
	}
	if n > 0 {
		k.beta = min(k.w.missWork, float64(k.pending)/float64(n))
	}
}

// cost is one rank's cost from its tiered overlap (blocks), booked prefix (blocks) and load.
func (k *kvselectTerms) cost(dev, host, disk int32, booked int, l *RankLoad) float64 {
	return k.costOf(dev, host, disk, booked, 0, 0, l.Speed, l.ActivePrefillTokens, l.PrefillSquares, l.PendingPrefills, l.ActiveRequests)
}

// costOf is cost from the load's fields: the rank's speed model, active prefill tokens, the sum
// of squares and count of pending prefills, and active requests. Products added to something
// are wrapped in float64 conversions so that no multiply-add is fused (see dynamoTerms.cost).
func (k *kvselectTerms) costOf(dev, host, disk int32, booked int, entries int32, capacity uint64, sp load.SpeedModel, prefill, squares uint64, pending, requests int) float64 {
	w := &k.w
	sp = k.price(sp)
	device := float64(max(dev, int32(booked)))
	tiers := float64(w.credit*device) + float64(w.host*float64(host)) + float64(w.disk*float64(disk))
	cached := min(k.isl, tiers*k.bs)
	queue := queueMS(sp, prefill, squares, pending)
	pull := w.affinity * sp.B * cached
	if w.affinityQueue > 0 {
		pull /= 1 + queue/w.affinityQueue
	}
	own := sp.MS(k.isl - cached)
	c := queue + float64((1+k.beta)*own) - pull + float64(w.reqWeight*float64(requests))
	if w.eviction > 0 {
		// The blocks it stores, not the prefill's fixed overhead, are what evicts.
		c += float64(float64(w.eviction*occupancy(entries, capacity, k.maxEntries)) * (own - sp.C))
	}
	return c
}
