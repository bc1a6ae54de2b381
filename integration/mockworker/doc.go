// Package mockworker is a simulated vLLM inference engine for kvselect's integration tests and
// benchmarks. It has no model: it keeps a KV cache of block hashes, charges simulated time for
// prefill and decode, and publishes the KV-cache events a real vLLM engine would publish, byte
// for byte in vLLM's wire format, on real ZeroMQ sockets. kvselect (or any KV-aware router)
// follows it exactly as it follows vLLM.
//
// # Engine model
//
// A Worker has one or more data-parallel ranks. Each rank owns
//
//   - a KV cache of Config.NumGPUBlocks blocks of Config.BlockSize tokens with prefix caching:
//     a prompt's full blocks are named by a chained engine hash; a running request pins the
//     blocks it uses; released blocks stay cached and are evicted least-recently-used first
//     when room is needed, and a request's blocks are released tail first, so deep suffix
//     blocks go before the shared prefix (as vLLM frees them). Pinned blocks are never
//     evicted; when every block is pinned the cache overcommits rather than refusing work
//     (RankStats.Overcommitted counts it). Only full blocks are cached, never the partial
//     last block of a prompt, and generated tokens are not cached (their content is unknown).
//   - a ZeroMQ PUB socket bound on its own endpoint (tcp port = base port + rank offset, as
//     vLLM offsets per DP rank) and, optionally, a ROUTER replay socket (same offset rule).
//   - a prefill queue: prefills on one rank run one at a time in arrival order (the GPU's
//     prefill throughput is the contended resource); decodes run concurrently.
//
// # Timing model
//
// Times are in model milliseconds, the time a real engine would take, from the engine model
// shared with kvselect's simulator (package integration/fleet), preset Config.Model. With T the
// prompt's uncached tokens (prompt tokens minus cached-prefix blocks × block size):
//
//   - preset "legacy" (the default, the Dynamo mocker's polynomials):
//     prefill_ms(T) = 4.209989e-07·T² + 1.518344e-02·T + 16.50142 and each of the max_tokens
//     decode steps takes itl_ms(u) = max(1, −25.74·u² + 54.01·u + 5.74), u being the rank's
//     pinned fraction of its cache when decoding starts (fleet.LegacyPrefillMS, LegacyITLMS);
//   - presets "h100-8b" and "h100x8-70b": the fleet step model of that preset — the prefill
//     is the sum of the chunked steps a lone prefill of T tokens after the cached ones takes
//     under max_num_batched_tokens (fleet.StepModel.PrefillMS), and decode step i costs
//     StepModel.DecodeStepMS(prompt + i). The mock worker serves each rank's prefills one at
//     a time and does not batch them with decodes; the simulator runs the full scheduler.
//
// A request's prefill starts at max(arrival, end of the rank's previous prefill); TTFT is
// arrival → prefill end, and E2E = TTFT + decode. The cache is consulted at arrival, so two
// concurrent requests for the same new prefix both compute it (as two vLLM requests scheduled
// in the same step would).
//
// Model time runs Config.Speedup times faster than the Clock: a model duration d is slept as
// d / Speedup. The reported ttft_ms and e2e_ms are model milliseconds computed from the
// formulas (not measured), so they are deterministic whatever the host's load.
//
// # Events on the wire
//
// Every cache mutation is published as one KVEventBatch (vLLM publishes one batch per
// scheduler step with the step's events): when a prefill ends, evictions made to find room
// come first as one BlockRemoved, then each contiguous run of newly cached blocks as one
// BlockStored carrying block_hashes, parent_block_hash (nil at the root), token_ids,
// block_size and medium "GPU". Reset publishes AllBlocksCleared. A message is the three
// frames [topic, seq as 8-byte big-endian, payload] with payload = kvevents.AppendBatch
// (vLLM's msgspec array form) and data_parallel_rank set to the rank's global DP rank.
//
// Engine block hashes deliberately differ from kvselect's local hash: block i's hash is
// XXH3-64 over LE64(hash of block i−1) followed by the block's tokens as LE32, with
// Config.HashSeed, and block 0's "parent" is a seed-derived root value (vLLM's NONE_HASH).
// A router must therefore index by token content, as kvselect does.
//
// The sequence number starts at 0 and grows by one per batch; Restart begins a new
// incarnation (empty caches, sequence back to 0, replay buffers emptied, same endpoints), as
// a restarted vLLM process would. The replay ROUTER keeps the last Config.ReplayBuffer
// batches and answers vLLM's protocol: a request [identity, empty, start_seq 8-byte BE] is
// answered with [identity, empty, topic, seq, payload] for every buffered batch with
// seq ≥ start_seq, in order, then the end marker [identity, empty, empty, 0xff×8, empty].
// DropLive injects the loss of live batches (their sequence numbers are consumed and they
// stay replayable), which is what a PUB high-water-mark drop looks like downstream.
//
// # Concurrency and ownership
//
// Every exported method of Worker is safe for concurrent use. Each rank has one mutex that
// guards its cache, its prefill queue and the order of its published batches; a rank's
// publisher has its own mutex for the sequence counter and replay buffer, always taken after
// the rank's. No lock is held while sleeping. The Worker owns its sockets; Close releases
// them and waits for the replay goroutines.
package mockworker
