package engine

// The KV-occupancy term of the kvselect policy (kvselect_cost.go). A long request — one whose
// prompt fills a sizeable share of a rank's KV cache — does not only pin blocks now: its context
// grows by a block every block_size output tokens, and in a multi-turn session by every turn's
// prompt and answer. Two such sessions on one rank fit when placed and evict each other's tail
// a few turns later; from then on every turn recomputes part of a context, and staying still
// prices cheaper than one full recompute elsewhere, so the pair never separates. The pressure
// term (kvselect_pressure.go) charges nothing until the pinned blocks exceed the capacity,
// too late for a context that will grow, and linear in the overflow, so it does not tell a
// rank at 40 % from one at 90 %.
//
// The term prices the occupancy a placement leaves its rank, squared, for requests whose
// blocks are at least kv_occupancy_min_share of the rank's capacity:
//
//	u         = (A + N − b) / K   (A the rank's active blocks, N the request's blocks, b of them
//	            already booked there, K its registered total_kv_blocks: the pressure term's
//	            quantities, all the router's own bookings)
//	occupancy = kv_occupancy_weight · u² · K · block_size · B   when N ≥ kv_occupancy_min_share · K
//
// in ms: u²·K blocks of prefill at the rank's priced per-token cost B. Convex, so that two long
// contexts on one rank cost more than one on each of two, and the cost of crowding grows as the
// rank fills; a long conversation on a rank with room stays on its cache (the term differs
// little between ranks at low occupancy, and its cached prefix saves a whole prefill).
//
// Why the gate. Ungated, the same term priced short chat by the long contexts it would sit
// beside and spread it off its caches (README, "Sixteen workers…": short chat on ample caches
// 0.95 → 1.28–1.43× the best rival's mean TTFT). A request that fills less than the share of a
// cache cannot crowd it. 0.3 is CacheStickShare's value, and the lowest of the shares measured
// (0.1, 0.15, 0.2, 0.3) at which the legacy model's overloaded agent sessions (~88K tokens,
// growing past 100K, on 1,000-block workers) were not priced off their caches (at 0.2 one seed
// went from 1.20× to 2.08× SGLang's mean: README, "KV occupancy priced for long requests").
//
// Ranks that did not register total_kv_blocks are never charged (K unknown); with weight 0 the
// term is off and the cost bit for bit what it was before it.

// occupancyMS is the occupancy term of one rank: active its active blocks, booked the request's
// blocks booked there, invCap 1/total_kv_blocks (0 = unknown: no charge), perTokenMS the rank's
// priced B.
func (k *kvselectTerms) occupancyMS(active uint64, booked int, invCap, perTokenMS float64) float64 {
	if !(k.w.occupancy > 0) || !(invCap > 0) || !(float64(k.islBlocks*invCap) >= k.w.occupancyShare) {
		return 0
	}
	u := float64(float64(active)+k.islBlocks-float64(booked)) * invCap
	if !(u > 0) {
		return 0
	}
	return float64(float64(k.w.occupancy*perTokenMS)*float64(k.bs*float64(u*u))) / invCap
}

// needsCapacity reports whether a term that reads the ranks' registered total_kv_blocks is on
// (pressure or occupancy).
func (w *weights) needsCapacity() bool { return w.pressure > 0 || w.occupancy > 0 }
