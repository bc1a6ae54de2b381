// Package sim is a discrete-event simulator that replays public LLM request traces through N
// simulated inference engines and a routing policy, to measure routing quality: token-level
// prefix-cache hit rate, time to first token, and load balance.
//
// The simulator is single-threaded and deterministic for a given seed.
//
// # Engine model
//
// Each worker is an engine of package integration/fleet, chosen by Config.Model: by default a
// vLLM-v1-style engine (continuous batching under max_num_batched_tokens, chunked prefill,
// max_num_seqs, prefix caching over an LRU of unreferenced 512-token blocks, preemption by
// recompute) timed by a documented step model of an 8B model on one H100 (fleet.PresetH100_8B)
// or a 70B model on eight (fleet.PresetH100x870). Preset "legacy" is the model the
// simulator used before: one FIFO prefill per worker timed by the Dynamo mocker's polynomial,
// decode beside it; it reproduces the old tables. TTFT is arrival → the engine step that
// samples the first token. A request the router held, or that an engine step passed over,
// counts as queued.
//
// # Information boundary
//
// Policies learn only what a deployment's router learns (View): their own bookkeeping of what
// they routed, the fields workers register (block size, total_kv_blocks,
// max_num_batched_tokens, max_num_seqs), KV events (stored when a block is committed, removed
// when evicted) delivered Config.KVEventDelayMS late, and the lifecycle: prefill_complete at
// the first token, free at the end. Engine-backed policies (Dynamo's cost function, kvselect's
// default) drive the real selection engine exactly as the HTTP service does —
// select_and_reserve at arrival, prefill_complete, free — and its prefix index is fed the same
// delayed events. Nothing hands a policy the engines' timing, queues or true cache.
//
// # Router queue
//
// An engine-backed policy whose configuration enables queueing (router_queue_threshold) sends
// requests through the engine's own router queue (engine.SelectQueued), as kvselect's service
// does: parked while every worker is busy, dispatched in the configured order as first tokens
// arrive and requests finish. The kvselect-queue policy is kvselect's with a threshold of one batch and wspt order.
package sim
