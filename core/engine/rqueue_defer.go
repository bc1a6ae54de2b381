package engine

// The aging order defers to engines that order their own queue.
//
// A request held in the router queue reaches an engine later than it would have, and that
// engine then has fewer requests to choose from. An engine that admits in arrival order (vLLM's
// default, SGLang's fcfs) loses nothing by it: the router's later decision sees fresher loads
// and caches, and its order (aging: earliest deadline first, rqueue.go) is one the engine would
// not have applied. An engine that orders its waiting queue by cached prefix (SGLang's lpm)
// loses what it is built for: hits that would have overtaken a queued miss wait in the router
// behind it. So under kvselect's own order, a partition the tracker has learned to reorder
// (load.Tracker.Reordered, from the order of first tokens; kvselect_reorder.go) admits every
// request at once, as if no queue were configured, and its parked requests drain on the next
// dispatch. Dynamo's orders (fcfs, lcfs, wspt) and explicit policy classes keep Dynamo's
// semantics: they park whatever the engines do.
//
// Measured (cmd/kvselect-matrix, 8 workers, seed 42, against every baseline; README, "Router
// queue"): with router_queue_threshold 1 the aging queue passes 63 of 108 cells on the
// vLLM-style 8B model against the default's 61 (unchanged by this rule: those engines are never
// learned to reorder), and on the SGLang-style (lpm) model 68 of 107 with 2 cells above 1.25×
// the best rival's mean (worst 1.30×), against 59 and 11 (worst 3.36×) parking there too; the
// default passes 66 there with none above.

// admits reports whether the router queue's admission check applies to req on partition p:
// queueing is configured for it, and it is not a partition whose engines order their own queue
// under the aging order (above).
func (e *Engine) admits(p *partition, req *SelectRequest) bool {
	if !e.queueing(req) {
		return false
	}
	return !(req.Busy == nil && e.cfg.PolicyConfig == "" && e.cfg.QueuePolicy == QueueAging && p.tracker.Reordered())
}
