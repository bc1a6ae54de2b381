package sim

// Observable worker state: what a router learns by scraping a vLLM worker's Prometheus
// /metrics endpoint, as llm-d's endpoint picker (gateway-api-inference-extension's vLLM metric
// mapping) and AIBrix do. Baselines that model a deployed router read these instead of the
// simulator's internals (PendingPrefillTokens, CachedPrefix), so they know no more than the
// real router would.
//
// Contract for simulator models: each method returns the worker's gauge as a scrape at the
// current simulation time would report it. A model that adds scrape lag or a vLLM-style step
// scheduler re-implements these three methods over its own state; policies must not need to
// change. Today's model (one FIFO prefill at a time, decodes concurrent) approximates them:
//
//	vLLM metric                   method            today's approximation
//	vllm:num_requests_running     RunningRequests   admitted requests past the prefill queue
//	                                                (the running prefill plus the decoding ones)
//	vllm:num_requests_waiting     WaitingRequests   requests queued for prefill on the worker
//	vllm:kv_cache_usage_perc      KVCacheUsage      pinned blocks ÷ capacity (vLLM counts
//	                                                cached but unreferenced blocks as free)
//
// Today's model stores a prompt's new blocks when its prefill ends, so KVCacheUsage misses the
// blocks of the prefill running now (vLLM allocates them when it schedules the request) and
// counts no decode-time growth; a step-level model should count both.
//
// vllm:kv_cache_usage_perc is vLLM v1's name; v0 exported vllm:gpu_cache_usage_perc with the same
// meaning (the fraction of KV blocks in use, 0–1).

// RunningRequests is vllm:num_requests_running of worker w: requests the engine has scheduled
// (prefilling or decoding). Observable.
func (v *View) RunningRequests(w int) int {
	wk := v.sim.workers[w]
	return wk.inflight - len(wk.queue)
}

// WaitingRequests is vllm:num_requests_waiting of worker w: requests the engine has received
// and not yet scheduled. Observable.
func (v *View) WaitingRequests(w int) int { return len(v.sim.workers[w].queue) }

// KVCacheUsage is vllm:kv_cache_usage_perc of worker w, in [0, 1]: the fraction of its KV blocks
// referenced by running requests. Observable.
func (v *View) KVCacheUsage(w int) float64 { return v.sim.workers[w].cache.Used() }
