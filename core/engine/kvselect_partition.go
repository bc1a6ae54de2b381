package engine

import "github.com/kvselect/kvselect/core/engine/load"

// The partition aggregates of the kvselect policy: what every rank's cost is priced against
// besides its own load. The consensus speed (kvselect_speed.go) needs the sum and count of the
// ranks' positive per-token costs B, the saturation (betaAt, kvselect_cost.go) the number of
// ranks with a pending prefill, the earlier β (without RobustKVSelect) the partition's pending
// prefills.
//
// Two ways to fill them, bit for bit equal on the same partition (TestFastPathDifferential and
// TestKVSelectAggregatesMatchScan compare them):
//
//   - observeRank, once per rank in candidate order (the general path, kvselectCosts, over its
//     scored records);
//   - observeTracker, once per selection from the load tracker's maintained aggregates
//     (load/aggregate.go), in O(1) (the fast path, kvselectPolicy.fast).
//
// The saturation sum is min(1, miss_work_weight) × (ranks with a pending prefill) in both: each
// busy rank counts once, however long its queue (betaAt), and the product is rounded once. (Up
// to miss_work_weight 1 that is the sum of min(miss_work_weight, pending) over ranks taken
// before, bit for bit for any weight whose multiples are exact; above 1 that sum counted a rank
// up to the weight and needed a scan of every rank's count.)

// observeRank takes one rank's learned (or prior) model into the partition's consensus and its
// pending prefills into the partition's saturation and pending count.
func (k *kvselectTerms) observeRank(sp load.SpeedModel, pending int) {
	k.pending += float64(pending)
	k.ranks++
	if pending > 0 {
		k.busyRanks++
	}
	if sp.B > 0 {
		k.sumB += sp.B
		k.sumK += sp.K
		k.nB++
	}
	k.settle()
}

// observeTracker is observeRank for every owner of tr in ordinal order, which must be the
// partition's candidates (partition.ordinalsValid; the fast path's precondition): the consensus
// sum from Tracker.SpeedSum, the pending count from Tracker.PendingPrefills (the float sum of
// integers observeRank adds is exact), the saturation from Tracker.BusyOwners: O(1).
//
// It replaces a pass over every rank that read its counters and speed before the cost pass
// read them again; with settle it is most of what the RobustKVSelect default had added to a
// selection. Measured with settle (2-core shared machine, 14 interleaved runs each, benchstat
// medians, main 021ee16 → this): BenchmarkSelectMooncake (integration/sim) p50 at 8 / 64 / 256
// workers 1.38 → 1.31 µs (−5 %), 2.87 → 2.47 µs (−14 %), 7.70 → 6.24 µs (−19 %), thread CPU
// per selection 1.77 → 1.71 µs (~), 3.38 → 2.98 µs (−12 %), 8.63 → 6.88 µs (−20 %), below the
// pre-RobustKVSelect configuration on main (p50 1.40 / 2.82 / 7.38 µs); BenchmarkFastSteps/
// kvselect_cost (this pass and the cost loop, 512 ranks) 21.1 → 16.7 µs (−21 %),
// BenchmarkSelectPaths fast-kvselect select thread CPU 30.5 → 26.2 µs (−14 %).
func (k *kvselectTerms) observeTracker(tr *load.Tracker) {
	k.ranks = tr.Owners()
	k.pending = float64(tr.PendingPrefills())
	k.sumB, k.sumK, k.nB = tr.SpeedSum()
	k.busyRanks = tr.BusyOwners()
	k.settle()
}

// settle recomputes the values derived from the aggregates, once per observation (once per
// selection on the fast path) instead of once per rank in costOf: betaAt's saturation
// min(1, miss_work_weight)·busyRanks/ranks and mean pending/ranks, and consensusPrice's
// consensus B̄ = sumB/nB with its band edge consensusBand·B̄ and the prior scaled to it. The
// operations and operands are those the cost used to evaluate per rank, so the costs are bit for
// bit unchanged.
func (k *kvselectTerms) settle() {
	w := &k.w
	k.sat, k.mean = 0, k.pending/max(1, float64(k.ranks))
	if k.ranks > 0 {
		k.sat = float64(w.saturationUnit()*float64(k.busyRanks)) / float64(k.ranks)
	}
	k.agreed = k.nB > 0 && w.prior.B > 0
	if k.agreed {
		ref := k.sumB / float64(k.nB)
		s := ref / w.prior.B
		k.consensus, k.consensusHi = load.SpeedModel{A: w.prior.A * s, B: ref, C: w.prior.C * s, K: k.sumK / float64(k.nB)}, consensusBand*ref
	}
}

// saturationUnit is what one rank with a pending prefill adds to the saturation sum:
// min(1, miss_work_weight). The saturation is the share of busy ranks, never more than 1,
// however high the weight caps a rank's own β (betaAt).
func (w *weights) saturationUnit() float64 { return min(1, w.missWork) }
