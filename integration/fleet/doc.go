// Package fleet is a deterministic model of one LLM inference engine, shared by kvselect's
// simulator (integration/sim) and mock worker (integration/mockworker), so that routing
// quality is measured against an engine that behaves like vLLM rather than against the
// selector's own cost formula.
//
// # The vLLM-style engine (New)
//
// Engine follows vLLM v1's scheduler (vllm/v1/core/sched/scheduler.py) with chunked prefill
// and prefix caching on:
//
//   - Continuous batching in steps. Each step has a token budget of max_num_batched_tokens.
//     Running requests are served first, in the order they started: a decoding request takes
//     one token, a request still prefilling takes min(remaining, budget) tokens (chunked
//     prefill). Waiting requests are then admitted first-come first-served while the budget
//     lasts and fewer than max_num_seqs requests run; the first that cannot get its blocks
//     stops admission for the step (head-of-line, as vLLM's FCFS policy does).
//   - A KV cache of NumBlocks blocks of BlockSize tokens (block_pool.py, kv_cache_utils.py).
//     A request holds the blocks its tokens occupy, allocated when it is scheduled. A full
//     prompt block is committed to the prefix cache when the step that computes its last
//     token is scheduled (kv_cache_manager.py allocate_slots → cache_blocks), so a request
//     admitted later in that same step already hits it. Committing does not de-duplicate: a
//     block two requests compute (a prompt's capped last block, say) is cached twice. Block
//     keys chain like vLLM's block hashes (key i = mix(key i−1, Blocks[i])), so a prefix hit
//     is always a contiguous leading run. Blocks held by requests are reference counted;
//     every free block, cached or not, sits on one free queue, and allocation pops its head,
//     evicting it if it is cached — freed uncommitted blocks age in the queue like cached
//     ones. A finished or preempted request frees its blocks tail first, so its deepest
//     blocks are evicted before its shared prefix. Decode tokens are never cached (their
//     block ids are unknown to a trace; vLLM does cache full decode blocks, which only a
//     later request repeating that output could hit).
//   - KV events (Stored, Removed) of a step's scheduling are published when the step ends,
//     as vLLM's update_from_output publishes the block pool's event queue.
//   - A new request looks up its cached prefix when it is first scheduled; at least one prompt
//     token is always computed (vLLM caps a hit at num_tokens − 1).
//   - When a running request needs a block and none can be found, the newest running request
//     is preempted (recompute mode: its blocks are freed, it returns to the front of the
//     waiting queue and later recomputes prompt and generated tokens, reusing whatever prefix
//     is still cached). A request whose prompt plus output could never fit the cache is
//     rejected at submission (vLLM refuses prompts beyond max_model_len).
//   - The step that computes a request's last prompt token samples its first token
//     (FirstToken: TTFT ends); each decode step then samples one token, and the request
//     finishes (Finished) when Output tokens are sampled.
//
// Step time is a linear model of the step's work (StepModel): a fixed cost per step (weights
// read from HBM, launch overhead), a cost per scheduled token (the GEMMs), an attention term
// per (query token, context token) pair of prefill chunks, a KV-read term per context token of
// every decoding request, and a per-decode cost. The presets (Presets) derive every constant
// from public hardware and model numbers; their doc comments give the sources.
//
// # The legacy engine (preset "legacy")
//
// The model kvselect's simulator used before: one FIFO prefill at a time per worker timed by
// the Dynamo mocker's polynomial, the cache consulted when the prefill starts, decode running
// beside prefill (it never delays one) at the mocker's ITL polynomial, and prefixcache's LRU.
// It reproduces the old routing-quality tables.
//
// # The SGLang-style engine (presets "sglang-h100-8b", "sglang-h100x8-70b")
//
// A second engine model, designed apart from the first so that routing is not tuned to one
// model's quirks (NewSGLang, sglang_engine.go; radix cache in sglang_cache.go; presets and
// roofline step time in sglang_spec.go): a token-granular KV pool with a radix-tree prefix
// cache (LRU over unlocked leaves), prefill batches and decode batches that never mix, prefill
// first, longest-prefix-match ordering of a short waiting queue, admission against the pool
// minus running requests' expected output (new_token_ratio), one chunked request at a time,
// and decode retraction when the pool runs out. Its presets are reached through Preset and
// IndependentPresets; Presets and PresetNames (what the default matrix runs) leave them out.
//
// # Variant presets ("a100-8b", "sglang-fcfs-h100-8b")
//
// The two engines under settings the default was not tuned on (variant_presets.go): the
// vLLM-style engine on an A100 with vLLM's A100 batch limits, and the SGLang-style engine in
// arrival order, SGLang's default schedule policy. Reached through Preset and VariantPresets.
//
// # Determinism and ownership
//
// An Engine is a pure state machine: no goroutines, clocks, randomness or map-order output.
// Time is the caller's (milliseconds); the same calls give the same events. An Engine is not
// safe for concurrent use. Event slices returned by Submit and Advance are appended to the
// caller's buffer; the Blocks of a Stored event alias the submitted Request's Blocks, those of
// a Removed event are freshly allocated, so both may be kept.
package fleet
