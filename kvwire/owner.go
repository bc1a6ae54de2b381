// Package kvwire is the shared vocabulary of kvselect's KV-cache model: who holds blocks (Owner)
// and where (Tier). It is a leaf: it imports only the standard library, so that the engine
// (core/engine and its radix and load packages), the transports (bus, bus/kvevents) and the
// recovery format all name these concepts with one type and never convert between copies.
//
// Wire spellings that differ per protocol (vLLM's "GPU"/"CPU_PINNED" media, the recovery
// format's "device"/"host_pinned" tiers) stay with their decoders; Tier.String and ParseTier are
// kvselect's own canonical names (/dump, recovery).
package kvwire

import "cmp"

// Owner is one holder of KV blocks and one schedulable unit of a partition: a worker and one of
// its global data-parallel ranks. Owners order by Worker, then Rank (Compare); every sorted
// owner list in kvselect uses that order.
type Owner struct {
	Worker uint64
	Rank   uint32
}

// Compare orders owners by Worker, then Rank. It returns -1, 0 or +1.
func (o Owner) Compare(p Owner) int {
	if c := cmp.Compare(o.Worker, p.Worker); c != 0 {
		return c
	}
	return cmp.Compare(o.Rank, p.Rank)
}
