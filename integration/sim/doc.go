// Package sim is a discrete-event simulator that replays public LLM request traces through N
// simulated inference workers and a routing policy, to measure routing quality: token-level
// prefix-cache hit rate, time to first token, and load balance.
//
// The simulator is single-threaded and deterministic for a given seed. Engine-backed policies
// (Dynamo's cost function, kvselect's default) drive the real selection engine exactly as the
// HTTP service does — select_and_reserve at arrival, prefill_complete when prefill ends, free
// when decoding ends — and the simulated workers feed the engine's prefix index with the
// KV-cache events a vLLM engine would publish (stored on prefill completion, removed on LRU
// eviction).
//
// # Worker model
//
// Each worker has a prefix cache of Capacity blocks (512-token blocks, the traces' unit) with
// LRU eviction of unpinned blocks; a running request pins its prompt blocks. Prefills run one at
// a time per worker in arrival order (the GPU's prefill throughput is the contended resource).
// A prefill of T uncached tokens takes
//
//	prefill_ms(T) = 4.209989e-07·T² + 1.518344e-02·T + 16.50142
//
// (the Dynamo mocker's polynomial). The cache is consulted when the prefill starts, so a prefix
// computed by an earlier request that finished meanwhile is reused. Decoding then runs
// concurrently with other work for output_length tokens at
//
//	itl_ms(u) = max(1, −25.74·u² + 54.01·u + 5.74)
//
// per token, u being the worker's pinned fraction of its cache when decoding starts. TTFT is
// arrival → prefill end. A request whose prefill had to wait behind another, or that waited in
// the router queue, counts as queued.
//
// # Router queue
//
// An engine-backed policy whose configuration enables queueing (router_queue_threshold) holds
// requests as kvselect's service does: parked while every worker is busy, dispatched in the
// configured order as prefills complete and requests finish (router_queue.go). The
// kvselect-queue policy is kvselect's with a threshold of one batch and wspt order.
package sim
