package engine

import (
	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// approxTTL feeds the prefix index from bookings when KV events are off (approximate mode): a
// booked request's blocks are assumed cached on the chosen rank until router_ttl_secs after the
// last booking that touched them.
//
// Entries are stored in the device tier with the block's position-dependent chained hash as the
// "external" hash, so the same block under different prefixes stays distinct.
//
// Invariants: deadline holds the latest expiry of every recorded (owner, external) pair; queue
// holds expiries in non-decreasing order and may contain superseded items, which expire()
// recognises by comparing with deadline. record clamps a deadline to the last one queued, so
// a caller's clock that steps back (its times carry no monotonic reading) keeps the order and
// never shortens an entry's life; it lengthens the entries recorded meanwhile by the step.
type approxTTL struct {
	deadline map[approxKey]int64
	queue    []approxItem
	head     int
	last     int64               // the latest deadline queued
	chain    []radix.StoredBlock // scratch
	one      [1]uint64           // scratch for single-entry removals

	// Deferred work (approx_steps.go): bookings' blocks not yet recorded, and a prune in
	// progress. listed: the partition is in the engine's approxList.
	backlog       []approxJob
	bhead         int
	pendingBlocks int // blocks in backlog not yet recorded
	pruning       bool
	listed        bool
}

type approxKey struct {
	owner    kvwire.Owner
	external uint64
}

type approxItem struct {
	key approxKey
	at  int64
}

func newApproxTTL() *approxTTL { return &approxTTL{deadline: make(map[approxKey]int64)} }

// record stores the prompt's blocks for o and (re)sets their deadline.
func (a *approxTTL) record(ix *radix.Index, o kvwire.Owner, blocks []uint64, deadline int64) {
	deadline = max(deadline, a.last)
	a.last = deadline
	a.chain = a.chain[:0]
	var prev uint64
	for i, b := range blocks {
		ext := b
		if i > 0 {
			ext = chainMix(prev, b)
		}
		prev = ext
		a.chain = append(a.chain, radix.StoredBlock{External: ext, Local: b})
		k := approxKey{o, ext}
		a.deadline[k] = deadline
		a.queue = append(a.queue, approxItem{k, deadline})
	}
	_ = ix.Store(o, kvwire.TierDevice, 0, false, a.chain)
	a.compact()
}

// compact drops superseded queue items once they outnumber the live entries: re-booking the
// same blocks appends an item per block each time, so without it the queue (not the index)
// would grow with the booking rate until the TTL. Live items keep their order. Amortised O(1)
// per record: it runs only when the queue is at least twice the live entries.
func (a *approxTTL) compact() {
	if n := len(a.queue) - a.head; n <= 2*len(a.deadline)+1024 {
		return
	}
	q := a.queue[:0]
	for _, it := range a.queue[a.head:] {
		if d, ok := a.deadline[it.key]; ok && d == it.at {
			q = append(q, it)
		}
	}
	clear(a.queue[len(q):])
	a.queue, a.head = q, 0
}

// expire removes every entry whose latest deadline is at or before now.
func (a *approxTTL) expire(ix *radix.Index, now int64) {
	for a.head < len(a.queue) && a.queue[a.head].at <= now {
		it := a.queue[a.head]
		a.head++
		if d, ok := a.deadline[it.key]; ok && d == it.at {
			delete(a.deadline, it.key)
			ix.Remove(it.key.owner, kvwire.TierDevice, []uint64{it.key.external})
		}
	}
	if a.head > len(a.queue)/2 && a.head > 1024 {
		a.queue = append(a.queue[:0], a.queue[a.head:]...)
		a.head = 0
	}
}

// dropOwner forgets an owner whose index entries were cleared.
func (a *approxTTL) dropOwner(o kvwire.Owner) {
	a.dropJobs(o)
	for k := range a.deadline {
		if k.owner == o {
			delete(a.deadline, k)
		}
	}
}

// chainMix derives a position-dependent identity from the previous identity and a block hash
// (splitmix64 finaliser over their combination; collisions are as unlikely as for 64-bit hashes).
func chainMix(prev, b uint64) uint64 {
	x := prev*0x9e3779b97f4a7c15 ^ b
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// pruneSome enforces the approximate index's block budget the way Dynamo's pruning does (its
// PruneConfig: max_tree_size 2^20, prune_target_ratio 0.8): once more than the budget of
// (owner, block) entries are recorded, entries are removed until target remain, earliest
// expiry first and, among entries expiring together (one booking's blocks), the deepest block
// first, so that the prefixes that stay are whole. It removes at most limit entries per call
// (approx_steps.go spreads a prune over steps) and returns how many it removed.
func (a *approxTTL) pruneSome(ix *radix.Index, target, limit int) int {
	removed := 0
	for len(a.deadline) > target && a.head < len(a.queue) && removed < limit {
		// The run of items expiring at the head's time, pruned back to front.
		at := a.queue[a.head].at
		end := a.head
		for end < len(a.queue) && a.queue[end].at == at {
			end++
		}
		for i := end - 1; i >= a.head && len(a.deadline) > target && removed < limit; i-- {
			it := a.queue[i]
			if d, ok := a.deadline[it.key]; ok && d == it.at {
				delete(a.deadline, it.key)
				a.one[0] = it.key.external
				ix.Remove(it.key.owner, kvwire.TierDevice, a.one[:])
				removed++
			}
		}
		if len(a.deadline) > target && removed < limit {
			a.head = end // the whole run is gone (or superseded)
		}
	}
	return removed
}
