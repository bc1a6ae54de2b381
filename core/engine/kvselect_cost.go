package engine

// kvselect's cost function. Dynamo's formula (cost.go) adds queued prefill blocks, the request's
// uncached blocks and the rank's active KV blocks; replaying the Mooncake traces shows it trades
// too much cache affinity for KV-block balance, and it counts queued prefill linearly although
// prefill time grows quadratically with prompt length. kvselect's policy instead estimates, in
// milliseconds, when this request's first token would come out on each rank, and subtracts the
// value of keeping its cached prefix where it already is:
//
//	prefill_ms(t) = A·t² + B·t + C                                   (per prompt, t uncached tokens)
//	queue_ms      = A·Σ pending_i² + B·Σ pending_i + C·n_pending      (prefills booked, not complete)
//	cached        = cached tokens on the rank, counting the leading blocks booked there by live
//	                requests (they are cached or being computed, their KV events not yet in)
//	cost          = queue_ms + prefill_ms(isl − cached)
//	                − affinity·B·cached / (1 + queue_ms/affinity_queue_ms)
//	                + request_w·active_requests
//
// The affinity term is the future value of locality: a conversation kept on the rank that holds
// its prefix keeps hitting there, while moving it duplicates the prefix and evicts others. The
// discount lets a heavily queued rank lose that pull, which bounds the tail latency pure
// affinity causes (requests piling up behind a long prefill).
//
// The defaults (affinity 60, queue scale 3000 ms) come from replaying the Mooncake traces through
// kvselect-sim (README, "Routing quality").
// With affinity 0 the policy is a pure earliest-first-token estimate. Lower-tier blocks count with
// the host/disk hit weights, as in Dynamo's overlap credit.

// kvselectCosts computes the kvselect policy's cost for every candidate in place.
func kvselectCosts(cs []scored, n *normalized, blockSize uint32, w weights) {
	bs := float64(blockSize)
	isl := float64(n.isl)
	prefillMS := func(t float64) float64 { return (w.modelA*t+w.modelB)*t + w.modelC }
	for i := range cs {
		s := &cs[i]
		device := float64(max(s.DeviceBlocks, int32(s.BookedPrefixBlocks)))
		cached := min(isl, (w.credit*device+w.host*float64(s.HostExtBlocks)+w.disk*float64(s.DiskExtBlocks))*bs)
		l := s.Load
		queue := w.modelA*float64(l.PrefillSquares) + w.modelB*float64(l.ActivePrefillTokens) + w.modelC*float64(l.PendingPrefills)
		pull := w.affinity * w.modelB * cached
		if w.affinityQueue > 0 {
			pull /= 1 + queue/w.affinityQueue
		}
		s.cost = queue + prefillMS(isl-cached) - pull + w.reqWeight*float64(l.ActiveRequests)
	}
}
