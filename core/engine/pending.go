package engine

import (
	"container/list"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// pendingSelection is what a /select with a selection_id captured for a later replayed
// POST /reservations.
type pendingSelection struct {
	key            PartitionKey
	id             string
	owner          kvwire.Owner
	norm           normalized
	effPrefill     uint64
	expectedOutput *uint32
	trackPrefill   bool
	session        string
	// quality is the booking's routing-quality sample, measured on the overlap the /select chose
	// on; the replay that books adds it to the partition's RoutingQuality (quality.go).
	quality qualitySample

	insertedAt int64  // unix nanos
	gen        uint64 // generation; a newer /select for the same id gets a higher one
	bytes      int64  // approximate size charged against the byte budget
	elem       *list.Element
}

type pendingKey struct {
	key PartitionKey
	id  string
}

// pendingCache holds unclaimed selections, bounded by age, count and approximate bytes (defaults
// 120 s, 4096, 256 MiB), evicting oldest first.
//
// Invariants: byKey and order hold the same entries; order is sorted by insertion time (oldest
// at the front); bytes is the sum of the entries' bytes.
type pendingCache struct {
	ttl        time.Duration
	maxEntries int
	maxBytes   int64
	byKey      map[pendingKey]*pendingSelection
	order      *list.List
	bytes      int64
	nextGen    uint64
}

func newPendingCache(ttl time.Duration, maxEntries int, maxBytes int64) *pendingCache {
	return &pendingCache{ttl: ttl, maxEntries: maxEntries, maxBytes: maxBytes, byKey: make(map[pendingKey]*pendingSelection), order: list.New()}
}

// pendingOverhead is the memory of one entry besides its hashes and strings, measured with
// TestPendingBytesMatchHeap: the entry struct (its allocation size class, pendingEntryClass),
// its list element (48), its map slot with the map's growth slack (~110) and the
// expected-output integer it keeps. The routing-quality sample moved the struct from the
// 224-byte class to the 240-byte one, and the charge by the same 16 bytes (416 → 432).
const pendingOverhead = 432

// pendingEntryClass is the allocation size class (64-bit platforms) pendingOverhead charges for
// the entry struct. Every field, fixed-size ones included, is inside it:
// TestPendingEntrySizeClass fails when the struct leaves the class (a new field outgrows it, or
// a removed one drops it to the class below), so the charge is re-measured instead of silently
// drifting.
const pendingEntryClass = 240

// size is an entry's memory: what its slices hold (capacity, not length: the hashing appends
// may over-allocate), its strings and the fixed overhead. Dynamo charges the hashes and strings
// only; charging the overhead too keeps small entries from exceeding the budget several times
// over (issue 15: 626 MiB resident for a 256 MiB budget).
func (ps *pendingSelection) size() int64 {
	return int64(8*cap(ps.norm.block) + 8*cap(ps.norm.seq) + len(ps.id) + len(ps.key.Model) + len(ps.key.Group) +
		len(ps.norm.lora) + len(ps.session) + pendingOverhead)
}

// insert adds or replaces (latest wins) an entry, after evicting entries older than the TTL,
// then evicts oldest entries while over the count or byte budget (an entry larger than the whole
// budget evicts itself).
func (c *pendingCache) insert(now time.Time, ps *pendingSelection) {
	c.expire(now)
	c.remove(ps.key, ps.id)
	c.nextGen++
	ps.gen = c.nextGen
	ps.insertedAt = now.UnixNano()
	ps.bytes = ps.size()
	ps.elem = c.order.PushBack(ps)
	c.byKey[pendingKey{ps.key, ps.id}] = ps
	c.bytes += ps.bytes
	for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.drop(c.order.Front().Value.(*pendingSelection))
	}
}

// peek returns a live entry and its generation; entries older than the TTL are absent.
func (c *pendingCache) peek(key PartitionKey, id string, now time.Time) (*pendingSelection, uint64) {
	ps := c.byKey[pendingKey{key, id}]
	if ps == nil || now.UnixNano()-ps.insertedAt > int64(c.ttl) {
		return nil, 0
	}
	return ps, ps.gen
}

// consume removes the entry after a successful booking, but only if it is still the generation
// that was booked: a newer /select for the same id survives.
func (c *pendingCache) consume(key PartitionKey, id string, gen uint64) {
	if ps := c.byKey[pendingKey{key, id}]; ps != nil && ps.gen == gen {
		c.drop(ps)
	}
}

// remove discards an entry unconditionally (explicit bookings).
func (c *pendingCache) remove(key PartitionKey, id string) {
	if ps := c.byKey[pendingKey{key, id}]; ps != nil {
		c.drop(ps)
	}
}

// expire evicts every entry older than the TTL.
func (c *pendingCache) expire(now time.Time) {
	cutoff := now.UnixNano() - int64(c.ttl)
	for f := c.order.Front(); f != nil; f = c.order.Front() {
		ps := f.Value.(*pendingSelection)
		if ps.insertedAt >= cutoff {
			return
		}
		c.drop(ps)
	}
}

func (c *pendingCache) drop(ps *pendingSelection) {
	c.order.Remove(ps.elem)
	delete(c.byKey, pendingKey{ps.key, ps.id})
	c.bytes -= ps.bytes
}

// len returns the number of resident entries (for tests and metrics).
func (c *pendingCache) len() int { return c.order.Len() }

// PendingSelections returns the number of resident pending selections.
func (e *Engine) PendingSelections() int { return e.pending.len() }
