package engine

// The pressure term of the kvselect policy (kvselect_cost.go). A vLLM-style worker pins the KV
// blocks of every running request; only the rest of its cache holds reusable prefixes. When a
// placement would need more blocks than the rank has left unpinned, the worker cannot admit it
// at once: it either waits until running requests finish, or decode preempts a running request
// (newest first) and later recomputes that request's context. Neither shows in the prefill
// queue — a rank running a few long contexts (agent sessions of tens of thousands of tokens)
// can have an empty prefill queue and no room. The first-token estimate prices that rank as
// idle, sends it the next long session, and preemptions cascade.
//
// The term charges the overflow as recompute: with A the rank's active blocks (its live
// bookings' prompt blocks, de-duplicated, and output blocks — the router's own bookings, so it
// is known without any worker report), N the request's blocks and b of them already booked on
// the rank (shared with a live request, so counted in A), and K the rank's registered
// total_kv_blocks,
//
//	overflow = max(0, A + N − b − K)    (blocks)
//	pressure = kv_pressure_weight · (1 + min(β, 1)) · B · block_size · overflow
//
// in ms, B the rank's per-token cost and β the miss-work factor of kvselect_cost.go: the
// recompute is uncached work on the rank and delays the requests queued behind it like any
// miss's. Its β stays within 1, where a miss's goes to 4: the overflow is a guess — the router
// cannot tell from its bookings whether the worker pins what it registers (a worker that does
// not never waits or preempts) — and a guess multiplied by a rank's whole queue moved sessions
// off their caches on such a worker (the legacy model's overloaded agentic workload: 2.3× the
// best baseline's mean TTFT with the pressure at the full β, 1.3× within 1; README, "Valuing
// reuse under load").
//
// It is zero on any rank with room (every rank of a lightly loaded fleet), so it changes only
// the choice between ranks some of which are full; a conversation is not moved by it unless its
// own rank is out of room and another is not. Ranks that did not register total_kv_blocks are
// never charged (K unknown).

// pressureMS is the pressure term of one rank: active its active blocks, booked the request's
// blocks booked there, invCap 1/total_kv_blocks (0 = unknown: no charge), perTokenMS the price of
// one recomputed token ((1 + min(β, 1))·B).
func (k *kvselectTerms) pressureMS(active uint64, booked int, invCap, perTokenMS float64) float64 {
	if !(k.w.pressure > 0) || !(invCap > 0) {
		return 0
	}
	over := float64(active) + k.islBlocks - float64(booked) - 1/invCap
	if !(over > 0) {
		return 0
	}
	return float64(k.w.pressure*perTokenMS) * float64(k.bs*over)
}
