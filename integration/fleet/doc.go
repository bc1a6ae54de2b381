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
//   - A KV cache of NumBlocks blocks of BlockSize tokens. A request holds the blocks its
//     computed tokens occupy. A full prompt block is committed to the prefix cache the step
//     its last token is computed (a Stored event). Block keys chain like vLLM's block hashes
//     (key i = mix(key i−1, Blocks[i])), so a prefix hit is always a contiguous leading run.
//     Blocks of running requests are pinned (reference counted); unreferenced cached blocks
//     sit on an LRU list and are evicted least-recently-freed first when a block is needed
//     and no empty one is left (a Removed event). A finished request frees its blocks tail
//     first, so deep suffix blocks go before the shared prefix, as vLLM frees them. Decode
//     tokens and the partial last prompt block are never cached.
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
// # Determinism and ownership
//
// An Engine is a pure state machine: no goroutines, clocks, randomness or map-order output.
// Time is the caller's (milliseconds); the same calls give the same events. An Engine is not
// safe for concurrent use. Event slices returned by Submit and Advance are appended to the
// caller's buffer; the Blocks of a Stored event alias the submitted Request's Blocks, those of
// a Removed event are freshly allocated, so both may be kept.
package fleet
