package engine

import (
	"github.com/kvselect/kvselect/core/engine/load"
)

// kvselect's cost function. Dynamo's formula (cost.go) adds queued prefill blocks, the request's
// uncached blocks and the rank's active KV blocks, in blocks. kvselect's policy prices each rank
// in milliseconds of work, with each rank's own prefill speed (speed.go), and charges a cache
// miss for what it costs the rest of the fleet, not only the request itself:
//
//	prefill_ms(t) = A·t² + B·t + C           (the rank's priced model, t uncached tokens: the
//	                prior scaled to the partition's consensus speed when the rank's learned
//	                speed is within 1.25× of that, its learned model otherwise; without
//	                RobustKVSelect the prior when within 2× of it; kvselect_speed.go)
//	queue_ms      = A·Σ pending_i² + B·Σ pending_i + C·n_pending + K·Σ pending_i·context_i
//	                (booked, not complete; context_i the prompt tokens cached when it was booked)
//	cached        = cached tokens on the rank, counting the leading blocks booked there by live
//	                requests (they are cached or being computed, their KV events not yet in)
//	own           = prefill_ms(isl − cached) + K·(isl − cached)·cached   (the new tokens'
//	                attention to the cached ones; K is the rank's model times the partition's
//	                learned context share, load/speed_context.go; 0 on an engine that does not
//	                pay for context)
//	β             = min(miss_work_weight, max(the rank's pending prefills, the share of
//	                ranks with a pending prefill))   (betaAt; miss_work_weight 4; without
//	                RobustKVSelect the partition's pending prefills per rank, capped)
//	occupancy     = the rank's indexed blocks / the fullest rank's (each in blocks of the
//	                partition's smallest registered cache, fillScales), × min(1, its cache heat /
//	                (cold_cache_share · the mean's)): a cache few requests have used lately
//	                holds stale blocks (kvselect_eviction.go)
//	cost          = queue_ms + (1 + β)·own     (on a partition learned to reorder its queue,
//	                  queue_ms + own + min(β'·own, reordered_miss_slowdown·(queue_ms + own)),
//	                  β' the same without the cap: kvselect_reorder.go)
//	                + eviction_weight·occupancy·(prefill_ms(isl − cached) − C)
//	                  ·(1 + min(β, eviction_miss_work))   (default 0; kvselect_eviction.go)
//	                + pressure (pinned blocks beyond the rank's KV capacity, recomputed at
//	                  (1 + min(β, 1))·B; kv_pressure_weight, default 1; kvselect_pressure.go)
//	                + kv_occupancy (a request of at least kv_occupancy_min_share (0.3) of the
//	                  rank's KV capacity: the squared occupancy it leaves the rank, u²·capacity
//	                  blocks of prefill at B; kv_occupancy_weight, default 2;
//	                  kvselect_occupancy.go)
//	                + decode (running contexts read every step it waits, priced at the
//	                  partition's context share: zero where context is free; kvselect_decode.go)
//	                + (request_w + active_request_tokens·B)·active_requests   (each live
//	                  booking's decode slot and KV, for a time the router cannot see;
//	                  kvselect_requests.go)
//	                − affinity·B·cached / (1 + queue_ms/affinity_queue_ms)
//
// queue_ms + own is the request's own time to first token on the rank. The other charges are its
// externalities, the reason a TTFT-greedy router collapses under load:
//
//   - Work delays others. A prefill's uncached work holds up the prefills sharing its rank's
//     steps and, on a saturated fleet, the requests that arrive while it runs; β counts them
//     (betaAt: per rank; the partition's mean without RobustKVSelect), so the work
//     counts (1 + β) times. Idle fleets (β ≈ 0) route for the request's
//     own TTFT; loaded ones value reuse more, which is what keeps an overloaded fleet from
//     trading hits for balance until its caches thrash. Per rank, an idle rank of a fleet that
//     is not saturated delays nobody, so a prefix too hot for its rank is replicated there at
//     its own prefill's price (the saturation, at most 1, is all an idle rank is charged); the
//     cap (4) keeps a hot prefix movable on a saturated fleet too: a rank whose queue exceeds
//     another's by more than (1 + β) times the prefix's prefill sends it there, and once
//     computed there (booked, then indexed) both ranks serve it.
//   - Stored blocks evict. On a full cache the blocks a miss stores push out as many of others'
//     (kvselect_eviction.go), work someone recomputes when that prefix returns; occupancy is
//     the chance that happens, discounted on a rank whose cache few requests have used lately
//     (what it would evict is stale). New sessions go where they displace least, conversations
//     stay where their cache is unless their rank is far more loaded.
//   - Pinned blocks preempt. A vLLM- or SGLang-style worker pins the blocks of its running
//     requests; a placement beyond its registered capacity waits or preempts a running
//     request, whose context is recomputed (kvselect_pressure.go). Zero on any rank with room.
//   - Long contexts crowd. A request that fills a large share of a cache grows into the rest;
//     two on one rank evict each other's tail turn after turn. The squared occupancy it leaves
//     its rank spreads such requests over ranks with room before any overflows
//     (kvselect_occupancy.go).
//
// The affinity pull (default 0) is the earlier model of locality's future value; at its old
// default of 30 it piled hot shared prefixes onto one rank and collapsed overloaded agentic
// workloads (README, "Routing quality"). Lower-tier blocks count with the host/disk hit
// weights, as in Dynamo's overlap credit.

// kvselectCosts computes the kvselect policy's cost for every candidate in place.
func kvselectCosts(cs []scored, n *normalized, blockSize uint32, w weights) {
	k := newKVSelectTerms(n, blockSize, w)
	k.observeScored(cs)
	for i := range cs {
		s := &cs[i]
		s.cost = k.scoredCost(s)
	}
}

// observeScored takes every rank of a selection (the partition's candidates, in order) into the
// partition aggregates: the general path's and KVSelectScorer's one pass before their costs.
func (k *kvselectTerms) observeScored(cs []scored) {
	for i := range cs {
		k.observeEntries(cs[i].entries, cs[i].fillScale)
		k.observeRank(cs[i].Load.Speed, cs[i].Load.PendingPrefills)
		k.observeHeat(cs[i].Load.CacheHeat)
	}
	k.settleHeat(len(cs))
}

// scoredCost is cost for a scored candidate (its indexed blocks and worker's capacity known).
func (k *kvselectTerms) scoredCost(s *scored) float64 {
	l := s.Load
	occ := 0.0
	if k.w.eviction > 0 {
		occ = occupancy(s.entries, s.fillScale, k.invMax()) * k.coldFactor(l.CacheHeat)
	}
	invCap, invBudget := 0.0, 0.0
	if k.w.needsCapacity() && s.w != nil {
		invCap = s.w.invKVCapacity()
	}
	if k.w.decodeCtx > 0 && s.w != nil {
		invBudget = s.w.invBatchBudget()
	}
	return k.costOf(s.DeviceBlocks, s.HostExtBlocks, s.DiskExtBlocks, s.BookedPrefixBlocks, occ, l.Speed,
		l.ActivePrefillTokens, l.PrefillSquares, l.PrefillCross, l.PendingPrefills, l.ActiveRequests, l.ActiveBlocks, l.ContextTokens, invCap, invBudget)
}

// speedDeadband is the factor within which a rank's learned speed is priced as its reference
// speed (see kvselectTerms.price).
const speedDeadband = 2

// kvselectTerms holds the per-selection invariants of the kvselect policy; costOf evaluates one
// rank. The fast path (fast.go) and kvselectCosts share it, so both compute bit-identical costs.
//
// Invariant: observeRank is called for every rank of the partition (or observeTracker once),
// and observeEntries for every rank when the eviction term is on, before costOf.
type kvselectTerms struct {
	w   weights
	bs  float64
	isl float64
	// islBlocks is the request's blocks, ⌈isl/bs⌉ (the pressure term).
	islBlocks float64
	// maxFill is the most blocks any rank holds in the index, each rank's scaled by its
	// fillScale (kvselect_eviction.go).
	maxFill float64
	// sumB and nB accumulate the ranks' per-token costs and sumK their context coefficients
	// (kvselect_speed.go); busyRanks counts the ranks with a pending prefill, of ranks ranks
	// (the saturation, betaAt, kvselect_partition.go).
	sumB      float64
	sumK      float64
	nB        int
	busyRanks int
	ranks     int
	// pending is the partition's pending prefills (β's mean without RobustKVSelect).
	pending float64
	// Derived from the above by settle after every observation (kvselect_partition.go), so that
	// costOf divides nothing per rank: betaAt's saturation and mean, and consensusPrice's model,
	// band edge and whether there is a consensus.
	sat, mean   float64
	consensus   load.SpeedModel
	consensusHi float64
	agreed      bool
	// heatSum sums the ranks' cache heats (the cold-cache discount, kvselect_eviction.go);
	// coldRef, from it by settleHeat, is cold_cache_share × their mean (0: no discount).
	heatSum, coldRef float64
}

func newKVSelectTerms(n *normalized, blockSize uint32, w weights) kvselectTerms {
	k := kvselectTerms{w: w, bs: float64(blockSize), isl: float64(n.isl)}
	if blockSize > 0 {
		k.islBlocks = float64((uint64(n.isl) + uint64(blockSize) - 1) / uint64(blockSize))
	}
	return k
}

// observeEntries takes one rank's indexed blocks, scaled by its fillScale, into the partition's
// maximum. A plain comparison, not the built-in max: the values are finite and non-negative, and
// max's NaN and signed-zero handling made this loop 10 % of BenchmarkFastSteps/kvselect_cost.
func (k *kvselectTerms) observeEntries(n int32, scale float64) {
	if v := float64(float64(n) * scale); v > k.maxFill {
		k.maxFill = v
	}
}

// observeHeat takes one rank's cache heat into the partition's sum; settleHeat, once all ranks
// ranks are observed (in candidate order on every path, so the sums agree bit for bit), derives
// the cold-cache reference.
func (k *kvselectTerms) observeHeat(h float64) { k.heatSum += h }

func (k *kvselectTerms) settleHeat(ranks int) {
	k.coldRef = 0
	if k.w.coldShare > 0 && k.heatSum > 0 && ranks > 0 {
		k.coldRef = float64(k.w.coldShare*k.heatSum) / float64(ranks)
	}
}

// invMax is 1/maxFill, 0 while every rank is empty.
func (k *kvselectTerms) invMax() float64 {
	if k.maxFill > 0 {
		return 1 / k.maxFill
	}
	return 0
}

// betaAt is β of a rank with pending prefills not yet complete: the requests its uncached work
// delays (see the top of this file). With RobustKVSelect (the default)
//
//	β = min(miss_work_weight, max(pending, saturation))
//	saturation = min(1, miss_work_weight) × the share of the partition's ranks with a pending
//	             prefill
//
// Two lower bounds on that number. Under chunked prefill (vLLM v1, SGLang) the prefills in
// flight on the rank share every step's token budget with it, so it delays each of them; on a
// FIFO engine it delays those that queue behind it, about as many while the rank stays busy
// (Little's law): pending. And on a saturated fleet every request that arrives while it runs
// queues somewhere, there being no idle rank to absorb it: saturation, the share of ranks with
// work pending (each rank counted once, so one hot rank's long queue does not make the fleet
// look saturated). The partition mean of the pending counts, used before, was that hot rank's queue
// spread over the fleet: with one prefix too hot for one rank it charged every idle rank the
// loaded fleet's (1 + β) for computing a replica, and the prefix stayed concentrated (load CV
// up to 1.05 against Dynamo's 0.15–0.24 on sysprompt-onehot); an idle rank of an unsaturated
// fleet now delays nobody and a replica there costs its own prefill. Without RobustKVSelect:
// the partition's pending prefills per rank, capped at miss_work_weight.
//
// The cap, miss_work_weight, is 4 (it was 1). At 1 a rank with one pending prefill and one
// with twenty priced a miss alike, and under overload a queue a few seconds longer than
// another's, or the pressure term's overflow, outweighed twice a conversation's prefill and
// moved it off its cache, a whole context recomputed to save one request's wait (the legacy
// model's overloaded agentic workload: 26–94 moves per run, hit rate 84.7–91.0 % against
// SGLang's router's 91.6 %, which moves none; mean TTFT 1.1–4.2× its over six seeds; README,
// "Valuing reuse under load"). Measured at 1, 2, 4 and 8 on both 8B matrices at two seeds: 4
// and 8 alike, 2 worse than either.
//
// Measured alternatives (README, "Robustness matrix"): saturation alone (no per-rank floor)
// avoids one 16-worker collapse but lets the legacy model's overloaded agentic workload
// collapse (2,128 ms mean against SGLang's 792; the per-rank rule 843) once the pressure term
// is on; the partition mean with the pressure term collapses it too (2,097 ms).
func (k *kvselectTerms) betaAt(pending int) float64 {
	if !k.w.robust {
		return min(k.w.missWork, k.mean)
	}
	return min(k.w.missWork, max(float64(pending), k.sat))
}

// price is the speed model a rank whose published model is sp (zero while unknown: fewer than
// load.TrustedSamples samples) is priced with. With RobustKVSelect, consensusPrice. Otherwise
// the reference speed is the configured prior, or the partition's central learned speed
// (w.central: the median over ranks with enough samples, load.Tracker.CentralSpeed; set only
// with Config.CentralPrefillSpeed, opt-in) when that lies outside a factor of speedDeadband of
// the prior — the prior itself is then wrong. A rank
// is priced at the reference when learning is off, sp is unknown, or sp lies within a factor
// of speedDeadband of the reference; at sp otherwise.
//
// The band: identical ranks learn speeds that differ by noise, and pricing that noise as
// speed feeds it back. In simulation a rank whose cache churns learns a per-token cost up to
// ~30 % above the truth (its booked uncached tokens undercount what it recomputes), and on a
// batching engine a busier rank batches more and measures faster; sending traffic to the
// rank that looks faster concentrated load 4× on identical workers (SGLang-style 70B preset,
// whose true speed is ~2× the prior, so every rank was out of the prior's band and priced at
// its own estimate), and pricing a churning rank as slow turned an overloaded agentic
// workload from bad to collapsed. Noise of that size is not acted on; a genuinely different
// worker (another GPU, a shared GPU, a larger model) differs from the rest by more and is
// priced at its learned speed.
func (k *kvselectTerms) price(sp load.SpeedModel) load.SpeedModel {
	ref := k.w.prior
	switch {
	case k.w.fixedSpeed:
		return ref
	case k.w.robust:
		return k.consensusPrice(sp)
	case !(sp.B > 0):
		return ref
	}
	if c := k.w.central; c.B > 0 && !withinBand(c.B, ref.B) {
		ref = c
	}
	if withinBand(sp.B, ref.B) {
		// The reference's speed, the rank's context share: K scaled as B is (both are the rank's
		// factor × the prior's; K also × the partition's learned share).
		ref.K = float64(sp.K/sp.B) * ref.B
		return ref
	}
	return sp
}

// withinBand reports whether per-token costs x and ref lie within a factor of speedDeadband.
func withinBand(x, ref float64) bool {
	return x < speedDeadband*ref && float64(x*speedDeadband) > ref
}

// queueMS is a rank's booked, not yet completed prefill work in its own speed model: prefill
// tokens, their squares and their products with their cached context (load.RankLoad).
func queueMS(sp load.SpeedModel, prefill, squares, cross uint64, pending int) float64 {
	return float64(sp.A*float64(squares)) + float64(sp.B*float64(prefill)) + float64(sp.C*float64(pending)) + float64(sp.K*float64(cross))
}

// costOf is one rank's cost from its tiered overlap (blocks), booked prefix (blocks), cache
// occupancy in [0, 1] and load fields: speed model, active prefill tokens, the sum of squares
// and count of pending prefills, active requests, active blocks and booked context tokens
// (load.RankLoad.ContextTokens), and 1/total_kv_blocks (0 = unknown, or the pressure and
// occupancy terms off) and 1/max_num_batched_tokens (0 = unknown or the decode term off).
// Products added to something are wrapped in float64 conversions so that no multiply-add is
// fused (see dynamoTerms.cost).
func (k *kvselectTerms) costOf(dev, host, disk int32, booked int, occ float64, sp load.SpeedModel, prefill, squares, cross uint64, pending, requests int, active, contexts uint64, invCap, invBudget float64) float64 {
	w := &k.w
	sp = k.price(sp)
	device := float64(max(dev, int32(booked)))
	tiers := float64(w.credit*device) + float64(w.host*float64(host)) + float64(w.disk*float64(disk))
	cached := min(k.isl, tiers*k.bs)
	queue := queueMS(sp, prefill, squares, cross, pending)
	fresh := sp.MS(k.isl - cached)                              // the uncached tokens' own work
	own := fresh + float64(float64(sp.K*(k.isl-cached))*cached) // and their attention to the cached ones (WorkMS)
	beta := k.betaAt(pending)
	var c float64
	if w.reordered {
		c = queue + own + k.reorderedMissMS(pending, queue, own) + k.requestsMS(sp, requests)
	} else {
		c = queue + float64((1+beta)*own) + k.requestsMS(sp, requests)
	}
	if w.affinity > 0 {
		pull := w.affinity * sp.B * cached
		if w.affinityQueue > 0 {
			pull /= 1 + queue/w.affinityQueue
		}
		c -= pull
	}
	if occ > 0 {
		// The blocks it stores, not the prefill's fixed overhead or its reading of the cached
		// context, are what evicts.
		c += float64(float64(float64(w.eviction*occ)*(fresh-sp.C)) * (1 + min(beta, w.evictionMiss)))
	}
	if invCap > 0 {
		c += k.pressureMS(active, booked, invCap, float64((1+min(beta, 1))*sp.B))
		c += k.occupancyMS(active, booked, invCap, sp.B)
	}
	if w.decodeCtx > 0 {
		read := float64(contexts)
		if w.decodeOnce {
			read = float64(k.bs * float64(active))
		}
		c += k.decodeMS(read, prefill, k.isl-cached, invBudget, float64(load.ContextShareOf(sp)*sp.B)) // κ·B
	}
	return c
}
