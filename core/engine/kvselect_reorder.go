package engine

import "github.com/kvselect/kvselect/core/engine/load"

// A miss priced for an engine that reorders its waiting queue (kvselect policy).
//
// The cost charges a miss's own work for the requests it delays: (1 + β)·own, β the rank's
// pending prefills or the fleet's saturation, capped at miss_work_weight (kvselectTerms.betaAt).
// That is an arrival-order engine's externality: a miss delays what arrives behind it. An engine
// that orders its waiting queue by cached prefix (SGLang's "lpm") serves later hits first; the
// miss mostly waits, delaying few, and what makes a rank slow is not the booked prefill the
// router counts but the running requests its hits keep there (their KV, their decode steps). On
// such an engine the arrival-order price misjudges both ways: capped, it lets a hot prompt's
// ranks fill with misses; uncapped, it keeps the prompt from replicating to ranks whose queues
// are short.
//
// So on a partition whose engines are learned to reorder (load.Tracker.Reordered, from the order
// of first tokens; load/order.go) the externality is
//
//	min(β'·own, reordered_miss_slowdown · (queue_ms + own)),   β' = max(pending, saturation)
//
// β' uncapped (the rank's pending prefills are what it holds), and bounded by the miss's own
// estimated time to first token on the rank times the slowdown (default 1): no placement is
// made worse than (1 + slowdown) times the request's own best for the others' sake (the cost
// of the rank it is sent to is at least its own TTFT there, and the rank where that is smallest
// costs at most (1 + slowdown) times it in these two terms), and a rank with a short queue may
// take a replica of a hot prefix at about twice its prefill.
//
// Measured (cmd/kvselect-matrix, seed 42, SGLang-style 8B in LPM order, 107 cells; cells passing,
// above 1.25×, worst mean ratio): arrival-order price 65, 1, 2.00×; uncapped alone 64, 4, 2.28×;
// the bound alone (cap 4) 66, 1, 1.71×; both, this rule, 67, 0, 1.10×. On arrival-order engines
// the same rule loses (vLLM-style 8B, 108 cells: 61, 0, 1.21× → 58, 2, 1.33×; slowdown 2: 59, 1),
// which is why it applies only where the engines are learned to reorder; every other partition
// keeps the arrival-order price bit for bit. The hot path gains one branch per rank:
// BenchmarkFastSteps/kvselect_cost 28.7 → 26.3 µs (p = 0.59, six runs alternated; noise), 0
// allocations either way.

// reorderedMissMS is the externality of own ms of uncached work on a rank with pending prefills
// and queue_ms of booked work, on a reordering partition (see above).
func (k *kvselectTerms) reorderedMissMS(pending int, queue, own float64) float64 {
	beta := max(float64(pending), k.sat)
	return min(float64(beta*own), float64(k.w.reorderSlowdown*(queue+own)))
}

// observePartition sets the per-selection weights that come from the partition's tracker: its
// central learned speed (Config.CentralPrefillSpeed) and whether its engines reorder their
// queues (Config.ReorderedMissSlowdown).
func (w *weights) observePartition(tr *load.Tracker) {
	if w.centralSpeed && !w.fixedSpeed {
		w.central = tr.CentralSpeed()
	}
	w.reordered = w.reorderSlowdown > 0 && tr.Reordered()
}
