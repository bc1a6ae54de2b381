package radix

import "github.com/kvselect/kvselect/kvwire"

// slab stores every node's owner entries in two parallel, pointer-free arenas: keys (owner index
// and tier bits, see entryKey) and ext (the owner's external block hash). A node's entries are one
// chunk [off, off+len) of capacity 1<<class, sorted by owner index.
//
// Chunks come in power-of-two size classes; a freed chunk goes on its class's free list and is
// handed out again before the arenas grow, so memory released by removals is reused. The free
// list is threaded through the chunks themselves: keys[off] holds the offset+1 of the next free
// chunk of the same class (0 ends the list).
//
// Keeping owner index and tiers in a 4-byte key, apart from the 8-byte external hash, means the
// Match hot loop streams 4 bytes per entry instead of 16.
//
// Concurrency: none; the owning Index serialises all calls.
type slab struct {
	keys []uint32
	ext  []uint64
	free [maxClass + 1]uint32 // head (offset+1) of each class's free list; 0 = empty
	// freeSlots counts entry slots sitting in free chunks (for Stats).
	freeSlots int
}

// maxClass bounds chunk sizes at 1<<maxClass entries (a node never has more owners than the index
// has owner indices, which is capped at maxOwners ≤ 1<<maxClass).
const maxClass = 26

// entryKey packs an owner index and its tier bits: idx<<keyShift | done<<5 | mark<<4 | tiers.
// Sorting keys sorts by owner index. The mark and done bits are scratch space for Dump
// (reachable; already emitted in a merged chain) and are zero outside it.
const (
	keyShift  = 6
	tierMask  = 1<<kvwire.NumTiers - 1
	markBit   = 1 << 4
	doneBit   = 1 << 5
	scratchMs = markBit | doneBit
)

func ownerOf(key uint32) uint32 { return key >> keyShift }

// alloc returns the offset of a chunk of capacity 1<<class. Reuses a free chunk when one exists.
func (s *slab) alloc(class uint8) uint32 {
	if h := s.free[class]; h != 0 {
		off := h - 1
		s.free[class] = s.keys[off]
		s.freeSlots -= 1 << class
		return off
	}
	off := len(s.keys)
	n := 1 << class
	s.keys = growLen(s.keys, n)
	s.ext = growLen(s.ext, n)
	return uint32(off)
}

// release puts the chunk at off (capacity 1<<class) on its free list.
func (s *slab) release(off uint32, class uint8) {
	s.keys[off] = s.free[class]
	s.free[class] = off + 1
	s.freeSlots += 1 << class
}

// reset releases both arenas (used when the index becomes empty).
func (s *slab) reset() { *s = slab{} }

// bytes is the memory held by the arenas (capacity, including free chunks).
func (s *slab) bytes() int { return cap(s.keys)*4 + cap(s.ext)*8 }

// growLen extends x by n zero elements, growing capacity geometrically.
func growLen[T any](x []T, n int) []T {
	if len(x)+n <= cap(x) {
		return x[:len(x)+n]
	}
	c := max(2*cap(x), len(x)+n, 64)
	y := make([]T, len(x)+n, c)
	copy(y, x)
	return y
}
