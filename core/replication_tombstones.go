package core

import "time"

// Tombstones close the one hole the resync rule (replication_resync.go) would otherwise open:
// a republished admission crossing a free of the same booking. Example: A republishes booking
// x; meanwhile a client frees x on B. B's free reaches A after A already queued x's admission,
// so B receives that admission after it freed x and would mirror x again — a ghost booking
// until the 300 s expiry guard. Likewise a free B made during an outage never reaches A, and
// A's republish after the reconnect would resurrect x on B.
//
// Rule: a replica remembers the ids of peer bookings it has seen freed (by a local free of a
// mirrored row, or by a peer's free event) and ignores a later *republished* admission of such an
// id (republishes are marked on the wire). A new admission of the id — a client may reuse an id
// once its booking completed; ids need only be unique while in flight — is applied and clears
// the tombstone. Frees of the replica's own bookings are not recorded:
// only their owner republishes them, and the owner's ledger forgets them on the free.
//
// Bounds: at most tombstoneCap ids (a ring; the oldest is forgotten first) and no longer than
// the engine's expiry guard. With the ring full, an old tombstone may be forgotten early and a
// late republish may resurrect that booking until expiry — the best-effort contract's usual
// divergence, no worse than without resync.
//
// Concurrency: guarded by Service.mu, like the ledger.
type tombstones struct {
	ring []string         // ids in insertion order, circular
	next int              // next slot to overwrite
	at   map[string]int64 // id → unix nanoseconds of the free (service clock)
}

// tombstoneCap bounds remembered frees: about 6 s of frees at 10,000 requests/s, a few MiB.
const tombstoneCap = 1 << 16

func newTombstones(capacity int) *tombstones {
	return &tombstones{ring: make([]string, capacity), at: make(map[string]int64, 1024)}
}

// add records that id was freed at now.
func (t *tombstones) add(id string, now time.Time) {
	if _, ok := t.at[id]; ok {
		t.at[id] = now.UnixNano()
		return
	}
	if old := t.ring[t.next]; old != "" {
		delete(t.at, old)
	}
	t.ring[t.next] = id
	t.next = (t.next + 1) % len(t.ring)
	t.at[id] = now.UnixNano()
}

// freed reports whether id was freed after cutoff.
func (t *tombstones) freed(id string, cutoff time.Time) bool {
	at, ok := t.at[id]
	return ok && at >= cutoff.UnixNano()
}

// forget drops id's tombstone (its ring slot stays until overwritten; deleting an absent key
// then is harmless).
func (t *tombstones) forget(id string) { delete(t.at, id) }

// len is the number of remembered ids.
func (t *tombstones) len() int { return len(t.at) }
