package sim

// Observable worker state: what a router learns by scraping a vLLM worker's Prometheus
// /metrics endpoint, as llm-d's endpoint picker (gateway-api-inference-extension's vLLM metric
// mapping) and AIBrix do. Baselines that model a deployed router read these instead of the
// simulator's internals, so they know no more than the real router would.
//
// Each method returns the worker's gauge as of the router's last scrape
// (Config.ScrapeIntervalMS; with 0, as a scrape now would report it), from the engine model's
// own state (fleet.Stats):
//
//	vLLM metric                   method            the engine model's value
//	vllm:num_requests_running     RunningRequests   requests in the running batch (prefilling
//	                                                or decoding; legacy: the running prefill
//	                                                plus the decoding ones)
//	vllm:num_requests_waiting     WaitingRequests   requests received and not scheduled, the
//	                                                preempted ones included
//	vllm:kv_cache_usage_perc      KVCacheUsage      blocks held by requests ÷ blocks (vLLM
//	                                                counts cached but unreferenced blocks as
//	                                                free; legacy: pinned blocks ÷ capacity)
//
// The vLLM-style engine allocates a request's blocks when it schedules it and grows them as it
// decodes, so KVCacheUsage counts the blocks of running prefills and decode growth.
//
// vllm:kv_cache_usage_perc is vLLM v1's name; v0 exported vllm:gpu_cache_usage_perc with the same
// meaning (the fraction of KV blocks in use, 0–1).

// RunningRequests is vllm:num_requests_running of worker w: requests the engine has scheduled
// (prefilling or decoding). Observable.
func (v *View) RunningRequests(w int) int { return v.sim.scraped(w).Running }

// WaitingRequests is vllm:num_requests_waiting of worker w: requests the engine has received
// and not yet scheduled. Observable.
func (v *View) WaitingRequests(w int) int { return v.sim.scraped(w).Waiting }

// KVCacheUsage is vllm:kv_cache_usage_perc of worker w, in [0, 1]: the fraction of its KV blocks
// held by requests. Observable.
func (v *View) KVCacheUsage(w int) float64 { return v.sim.scraped(w).KVUsage }
