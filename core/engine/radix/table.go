package radix

// table is an open-addressing hash table from a (uint32, uint64) key to a non-zero uint32 value.
//
// The index uses two of them: children, keyed by (parent node, local block hash) → child node,
// and lookup, keyed by (owner index, external block hash) → node. Both keys and values have the
// same shape, so one pointer-free implementation serves both; the garbage collector never scans
// its slots.
//
// Invariants:
//   - len(slots) is zero or a power of two ≥ minTableSize; mask == len(slots)-1.
//   - A slot is empty iff its val is 0 (node 0 is the root, which is never a child and never an
//     owner's node, so 0 is free to mean "empty").
//   - Linear probing without tombstones: every stored key sits in the probe run that starts at its
//     home slot with no empty slot in between. del keeps this by backward-shift deletion.
//   - used ≤ maxLoad·len(slots); the table doubles on insert past that and halves when used
//     drops below len/8, so memory follows the live size in both directions.
//
// Concurrency: none; the owning Index serialises all calls.
type table struct {
	slots []slot
	mask  uint64
	used  int
	seed  uint64
}

// slot is one 16-byte table cell.
type slot struct {
	b   uint64 // wide half of the key (a block hash)
	a   uint32 // narrow half of the key (a node or owner index)
	val uint32 // 0 = empty
}

const (
	minTableSize = 16
	// maxLoadNum/maxLoadDen is the highest fill ratio before doubling. 3/4 keeps linear-probing
	// runs short (≈2.5 probes for a hit, ≈8.5 for a miss at the limit).
	maxLoadNum = 3
	maxLoadDen = 4
)

// hashKey mixes a key into 64 well-distributed bits (murmur3 fmix64 finaliser over the key and
// the table seed). Both halves contribute to every output bit.
func (t *table) hashKey(a uint32, b uint64) uint64 {
	x := b ^ t.seed
	x += uint64(a) * 0x9E3779B97F4A7C15
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// get returns the value stored under (a, b), or 0 if the key is absent.
func (t *table) get(a uint32, b uint64) uint32 {
	if t.used == 0 {
		return 0
	}
	i := t.hashKey(a, b) & t.mask
	for {
		s := &t.slots[i]
		if s.val == 0 {
			return 0
		}
		if s.b == b && s.a == a {
			return s.val
		}
		i = (i + 1) & t.mask
	}
}

// touchSlot loads the home slot of (a, b) and returns its value. Batch callers run it over a
// whole event before the dependent work, so the CPU overlaps the cache misses of independent
// keys instead of taking them one at a time.
func (t *table) touchSlot(a uint32, b uint64) uint32 {
	if len(t.slots) == 0 {
		return 0
	}
	return t.slots[t.hashKey(a, b)&t.mask].val
}

// put stores val (which must be non-zero) under (a, b), replacing any previous value.
func (t *table) put(a uint32, b uint64, val uint32) {
	if (t.used+1)*maxLoadDen > len(t.slots)*maxLoadNum {
		t.resize(max(minTableSize, len(t.slots)*2))
	}
	i := t.hashKey(a, b) & t.mask
	for {
		s := &t.slots[i]
		if s.val == 0 {
			*s = slot{b: b, a: a, val: val}
			t.used++
			return
		}
		if s.b == b && s.a == a {
			s.val = val
			return
		}
		i = (i + 1) & t.mask
	}
}

// del removes (a, b) and reports whether it was present. Later members of the probe run are
// shifted back so that no tombstone is needed.
func (t *table) del(a uint32, b uint64) bool {
	if t.used == 0 {
		return false
	}
	i := t.hashKey(a, b) & t.mask
	for {
		s := &t.slots[i]
		if s.val == 0 {
			return false
		}
		if s.b == b && s.a == a {
			break
		}
		i = (i + 1) & t.mask
	}
	// Backward-shift: move each following entry into the hole unless its home slot lies
	// cyclically in (hole, j], in which case moving it would put it before its home.
	hole := i
	j := i
	for {
		j = (j + 1) & t.mask
		s := t.slots[j]
		if s.val == 0 {
			break
		}
		home := t.hashKey(s.a, s.b) & t.mask
		if (j-home)&t.mask >= (j-hole)&t.mask {
			t.slots[hole] = s
			hole = j
		}
	}
	t.slots[hole] = slot{}
	t.used--
	if len(t.slots) > minTableSize && t.used*8 < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
	return true
}

// resize rehashes every entry into a fresh slot array of n (a power of two) slots.
func (t *table) resize(n int) {
	old := t.slots
	t.slots = make([]slot, n)
	t.mask = uint64(n - 1)
	for _, s := range old {
		if s.val == 0 {
			continue
		}
		i := t.hashKey(s.a, s.b) & t.mask
		for t.slots[i].val != 0 {
			i = (i + 1) & t.mask
		}
		t.slots[i] = s
	}
}

// reset drops every entry and releases the slot array.
func (t *table) reset() {
	t.slots = nil
	t.mask = 0
	t.used = 0
}

// bytes is the memory held by the slot array.
func (t *table) bytes() int { return len(t.slots) * 16 }
