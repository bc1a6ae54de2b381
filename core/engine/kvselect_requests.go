package engine

import "github.com/kvselect/kvselect/core/engine/load"

// The live-request term of the kvselect policy (kvselect_cost.go):
//
//	requests = (request_w + active_request_tokens · B) · active_requests
//
// (ms; B the rank's priced per-token prefill cost, active_requests its live bookings — running
// or waiting for their first token, this replica's and its peers' — active_request_tokens
// 256 by default, Config.ActiveRequestTokens, and request_w Dynamo's
// decode_active_request_weight, 0 by default.)
//
// Why. Every other term prices work the router can see: the prefills it booked (queue), the
// prompt's own prefill and what it costs others (β, eviction), pinned KV beyond a registered
// capacity (pressure), and decode reads of booked contexts where the partition has learned
// that context costs time (decode, κ). What it cannot see is how long each live booking will
// hold its decode slot and its KV: output lengths are unknown (expected_output_tokens is
// rarely sent), and each running request adds its share to every step, holds blocks a waiting
// request may need, and, on an engine whose waiting queue is bounded by KV (a tight cache),
// delays the admission of what comes after it. Below the pressure term's capacity threshold and
// where κ is not learned — a workload without prefix reuse never learns it, so the decode term
// is 0 there — nothing priced a rank's running requests at all, and a rank with many long
// decodes looked as idle as an empty one to a prompt whose prefill queue was short. Counting
// live requests is what least-loaded and Dynamo's decode-block term do; this term prices the
// count in the same milliseconds as the rest of the cost, at the rank's own speed, so that it
// scales with the hardware (a 70B model on eight GPUs and an 8B model on one are priced in
// their own time) and stays small beside a prefill: 256 tokens is a sixteenth of an 8K-token
// prompt's prefill (ignoring its quadratic part) and about 9 ms at the per-token cost the
// simulator's vLLM-style 8B workers learn.
//
// Measured (README, "Live requests priced"): on both 8B matrices of cmd/kvselect-matrix at
// seed 42, 256 and 512 tokens at the rank's speed and fixed weights of 4 and 10 ms per request
// each moved the same way against the term off (more cells within the bar, fewer above 1.25×,
// lower geometric-mean ratios; 117 → 123 of 215 cells pass at 256 tokens, 5 → 2 above 1.25×),
// most on the no-reuse, hot-system-prompt and mixed cells. 256 is on that plateau, not a fit;
// in tokens at the rank's speed it carries to a faster or slower model, which a fixed number of
// milliseconds would not.
//
// A rank's requests are priced at its priced model (kvselectTerms.price), so ranks within the
// consensus band are priced alike and a rank genuinely slower pays more per request.

// requestsMS is the price of a rank's requests live bookings at its priced model sp: this term
// plus Dynamo's fixed decode_active_request_weight (request_w), the one place the cost counts
// live requests. With either weight 0 it is bit for bit the other alone.
func (k *kvselectTerms) requestsMS(sp load.SpeedModel, requests int) float64 {
	perRequest := k.w.reqWeight + float64(k.w.reqTokens*sp.B)
	return float64(perRequest * float64(requests))
}
