// Package mockworker is a simulated vLLM inference engine for kvselect's integration tests and
// benchmarks. It has no model: it keeps a KV cache of block hashes, charges simulated time for
// prefill and decode, and publishes the KV-cache events a real vLLM engine would publish, byte
// for byte in vLLM's wire format, on real ZeroMQ sockets. kvselect (or any KV-aware router)
// follows it exactly as it follows vLLM.
//
// # Engine model
//
// Config.Model picks the engine model, shared with kvselect's simulator (package
// integration/fleet). A Worker has one or more data-parallel ranks. Each rank owns
//
//   - a KV cache of Config.NumGPUBlocks blocks of Config.BlockSize tokens with prefix caching:
//     a prompt's full blocks are named by a chained engine hash; a running request pins the
//     blocks it uses; released blocks stay cached and are evicted least-recently-used first
//     when room is needed, and a request's blocks are released tail first, so deep suffix
//     blocks go before the shared prefix (as vLLM frees them). Only full blocks are cached,
//     never the partial last block of a prompt, and generated tokens are not cached.
//   - a ZeroMQ PUB socket bound on its own endpoint (tcp port = base port + rank offset, as
//     vLLM offsets per DP rank) and, optionally, a ROUTER replay socket (same offset rule).
//   - with the realistic presets ("h100-8b", "h100x8-70b"), the fleet's vLLM-style engine
//     (fleet.Engine): continuous batching in steps under max_num_batched_tokens, chunked
//     prefill, max_num_seqs, blocks allocated at scheduling, preemption when decode needs a
//     block; a request that can never fit the cache is refused (ErrBadRequest). The engine
//     moves only when a request looks (on arrival, and each time a request wakes, it runs
//     every step due by then), so model time stays exact whatever the host's load; each
//     step's KV events leave as one batch, as vLLM publishes once per step.
//   - with preset "legacy" (the default), a prefill queue: prefills on one rank run one at a
//     time in arrival order, decodes run concurrently; pinned blocks are never evicted, and
//     when every block is pinned the cache overcommits rather than refusing work
//     (RankStats.Overcommitted counts it).
//
// # Timing model
//
// Times are in model milliseconds, the time a real engine would take. With the realistic
// presets a step takes the preset's fleet.StepModel time; TTFT is arrival → the step that
// samples the first token, E2E arrival → the step that samples the last, and max_tokens
// counts the first token (0 is served as 1). With preset "legacy" (the Dynamo mocker's
// polynomials, fleet.LegacyPrefillMS and LegacyITLMS), with T the prompt's uncached tokens
// (prompt tokens minus cached-prefix blocks × block size) the prefill takes
//
//	prefill_ms(T) = 4.209989e-07·T² + 1.518344e-02·T + 16.50142
//
// and each of the max_tokens decode steps takes
//
//	itl_ms(u) = max(1, −25.74·u² + 54.01·u + 5.74)
//
// with u the rank's pinned fraction of its cache when decoding starts. A request's prefill
// starts at max(arrival, end of the rank's previous prefill); TTFT is arrival → prefill end,
// and E2E = TTFT + max_tokens × itl_ms(u). The legacy cache is consulted at arrival, so two
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
// scheduler step with the step's events; the realistic presets publish exactly that, legacy
// one batch per prefill): when a legacy prefill ends, evictions made to find room
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
