package engine

import (
	"github.com/kvselect/kvselect/core/engine/radix"
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
}

type approxKey struct {
	owner    Owner
	external uint64
}

type approxItem struct {
	key approxKey
	at  int64
}

func newApproxTTL() *approxTTL { return &approxTTL{deadline: make(map[approxKey]int64)} }

// record stores the prompt's blocks for o and (re)sets their deadline.
func (a *approxTTL) record(ix *radix.Index, o Owner, blocks []uint64, deadline int64) {
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
	_ = ix.Store(o, radix.TierDevice, 0, false, a.chain)
}

// expire removes every entry whose latest deadline is at or before now.
func (a *approxTTL) expire(ix *radix.Index, now int64) {
	for a.head < len(a.queue) && a.queue[a.head].at <= now {
		it := a.queue[a.head]
		a.head++
		if d, ok := a.deadline[it.key]; ok && d == it.at {
			delete(a.deadline, it.key)
			ix.Remove(it.key.owner, radix.TierDevice, []uint64{it.key.external})
		}
	}
	if a.head > len(a.queue)/2 && a.head > 1024 {
		a.queue = append(a.queue[:0], a.queue[a.head:]...)
		a.head = 0
	}
}

// dropOwner forgets an owner whose index entries were cleared.
func (a *approxTTL) dropOwner(o Owner) {
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
