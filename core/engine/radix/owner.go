package radix

import (
	"slices"

	"github.com/kvselect/kvselect/kvwire"
)

// maxOwners caps interned owners so that an index fits in an entryKey (32-keyShift bits), a
// node's entry count fits node.meta's 26 count bits, and every entry list fits a slab chunk.
const maxOwners = 1 << maxClass

// owners interns Owner values to dense uint32 indices so that node entries can hold 4-byte keys.
//
// Invariants:
//   - byOwner[list[i].o] == i for every live index i; a freed index is on freeIdx and absent from
//     byOwner and sorted.
//   - sorted holds the live indices ordered by Owner; rankOf[i] is i's position in sorted.
//   - list[i].entries is the number of (node, owner i) entries in the index. An index is freed as
//     soon as it drops to zero, so live owners are exactly the owners holding something.
//
// Interning and freeing cost O(live owners) (rank maintenance); both are rare (an owner's first
// block and its last removal). Lookups are one map access.
type owners struct {
	byOwner map[kvwire.Owner]uint32
	list    []ownerInfo
	sorted  []uint32
	freeIdx []uint32
	// rankOf (the only record of a live index's rank) and byRank[r] == list[sorted[r]].o are
	// dense for Match's hot loops (4 and 16 bytes per owner instead of a 24-byte ownerInfo).
	rankOf []uint32
	byRank []kvwire.Owner
	// version counts changes of the live set (an intern of a new owner, a release): ranks are
	// stable while it is unchanged (see Index.Version).
	version uint64
}

type ownerInfo struct {
	o       kvwire.Owner
	entries int
}

func (ot *owners) lookup(o kvwire.Owner) (uint32, bool) {
	i, ok := ot.byOwner[o]
	return i, ok
}

// intern returns o's index, creating it if needed; ok is false when maxOwners is reached.
func (ot *owners) intern(o kvwire.Owner) (idx uint32, ok bool) {
	if i, found := ot.byOwner[o]; found {
		return i, true
	}
	if n := len(ot.freeIdx); n > 0 {
		idx = ot.freeIdx[n-1]
		ot.freeIdx = ot.freeIdx[:n-1]
		ot.list[idx] = ownerInfo{o: o}
	} else {
		if len(ot.list) >= maxOwners {
			return 0, false
		}
		idx = uint32(len(ot.list))
		ot.list = append(ot.list, ownerInfo{o: o})
		ot.rankOf = append(ot.rankOf, 0)
	}
	if ot.byOwner == nil {
		ot.byOwner = make(map[kvwire.Owner]uint32)
	}
	ot.byOwner[o] = idx
	pos, _ := slices.BinarySearchFunc(ot.sorted, o, func(i uint32, o kvwire.Owner) int {
		return ot.list[i].o.Compare(o)
	})
	ot.sorted = slices.Insert(ot.sorted, pos, idx)
	ot.renumber(pos)
	ot.version++
	return idx, true
}

// release frees idx (whose entry count must be zero) for reuse.
func (ot *owners) release(idx uint32) {
	pos := int(ot.rankOf[idx])
	ot.sorted = slices.Delete(ot.sorted, pos, pos+1)
	ot.renumber(pos)
	ot.version++
	delete(ot.byOwner, ot.list[idx].o)
	ot.list[idx] = ownerInfo{}
	ot.freeIdx = append(ot.freeIdx, idx)
}

func (ot *owners) renumber(from int) {
	ot.byRank = slices.Grow(ot.byRank[:0], len(ot.sorted))[:len(ot.sorted)]
	for p := 0; p < len(ot.sorted); p++ {
		i := ot.sorted[p]
		if p >= from {
			ot.rankOf[i] = uint32(p)
		}
		ot.byRank[p] = ot.list[i].o
	}
}

func (ot *owners) live() int { return len(ot.sorted) }

func (ot *owners) bytes() int {
	// Rough: map entries (~48 B each with overhead) plus the dense slices.
	return len(ot.byOwner)*48 + cap(ot.list)*24 + cap(ot.sorted)*4 + cap(ot.freeIdx)*4 +
		cap(ot.rankOf)*4 + cap(ot.byRank)*16
}
