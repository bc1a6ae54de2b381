// Package kvwire is the shared vocabulary of kvselect's KV-cache model: who holds blocks (Owner)
// and where (Tier). A leaf (standard library only), so that core/engine, radix, load, bus,
// bus/kvevents and recovery name each concept with one type and never convert between copies.
// Protocol spellings (vLLM's "GPU"/"CPU_PINNED" media) stay with their decoders; Tier.String and
// ParseTier are kvselect's canonical names (/dump, recovery).
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
