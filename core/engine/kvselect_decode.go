package engine

// The decode term of the kvselect policy (kvselect_cost.go). A vLLM-style step runs the rank's
// decodes with its prefill chunk, and decode attention reads every running request's whole
// context each step: a rank serving many or long conversations has slow steps however short
// its prefill queue. The prefill model (speed.go) prices scheduled tokens, not that; without
// the term a rank full of running contexts looks idle to a request whose prefill is short
// (a hot shared prefix makes most prefills short), and such requests pile onto it.
//
// The term is the context read over the steps the request waits for:
//
//	context  = booked_context − active_prefill_tokens   (tokens: the prompt tokens of the rank's
//	           live bookings, a prefix shared by n of them counted n times, less the prefill not
//	           yet computed — the router's own bookings, no worker report)
//	steps    = 1 + (active_prefill_tokens + uncached) / max_num_batched_tokens
//	decode   = decode_context_weight · κ · B · context · steps
//	           (ms; B the rank's per-token cost, κ the partition's context share)
//
// A worker that did not register max_num_batched_tokens counts one step.
//
// Why per request. Paged attention reads each running request's KV every step, a prompt prefix
// it shares with other requests included (vLLM's and SGLang's default kernels; the simulator's
// engines time decode by the summed context of the batch), so a rank running 100 requests on
// one 20K-token system prompt reads 2M tokens a step while pinning 20K. The term counted the
// rank's active blocks, each shared block once, until the sysprompt-onehot workloads showed the
// cost of that: such a rank looked as cheap as an idle one, the hottest prompt stayed on a
// few ranks whose steps were several times slower (load CV 0.70 against Dynamo's 0.09, mean
// TTFT 1.19× Dynamo's on the SGLang-style model at sysprompt-onehot/s2, tight caches, 1×).
// Config.DecodeSharedPrefixOnce restores the count once, for engines whose kernels read a
// shared prefix once for the batch (README, "Shared prefixes read per running request").
//
// Why κ. A prefill's attention to its cached context and a decode's reads of its running
// context are the same attention over the same KV: an engine that pays for one pays for the
// other, and one timed by new tokens only pays for neither (the Dynamo mocker's polynomial,
// the simulator's legacy preset, where decode never delays prefill). The router cannot time
// decode steps, but the partition learns κ from its prefill completions
// (load/speed_context.go): 1.16 on the simulator's vLLM-style 8B preset, 1.06 on the
// SGLang-style one, 0.44–0.47 on the 70B TP8 preset, 0 on legacy. Scaled by it, the default
// weight (1e-3 per unit of κ) gives 1.2e-3 and 4.5e-4, near the ratios derived from KV bytes
// over bandwidth against 2·parameters FLOP (1.3e-3 for an 8B model on one H100, 3e-4 for 70B
// on eight), and nothing on an engine that does not read context. At a fixed 1e-3 the term
// collapsed the legacy preset's overloaded agentic workload (TestNoCollapseUnderOverload:
// mean TTFT 2,564 ms against SGLang's 792; 843 at κ = 0), since it priced decode work that
// model never does and moved long sessions off their caches.

// invBatchBudget is 1/max_num_batched_tokens of the worker, 0 when unknown.
func (w *worker) invBatchBudget() float64 {
	if m := deref(w.spec.MaxNumBatchedTokens, 0); m > 0 {
		return 1 / float64(m)
	}
	return 0
}

// decodeMS is the decode term of one rank: read the context tokens its bookings' decodes read
// every step (load.RankLoad.ContextTokens; its active blocks' tokens with
// Config.DecodeSharedPrefixOnce), prefill its active prefill tokens, uncached the request's
// uncached tokens there, invBudget 1/max_num_batched_tokens (0 = one step), perTokenMS κ times
// its priced B.
func (k *kvselectTerms) decodeMS(read float64, prefill uint64, uncached, invBudget, perTokenMS float64) float64 {
	ctx := read - float64(prefill)
	if !(k.w.decodeCtx > 0) || !(ctx > 0) {
		return 0
	}
	steps := 1 + float64((float64(prefill)+uncached)*invBudget)
	return float64(float64(k.w.decodeCtx*perTokenMS)*ctx) * steps
}
