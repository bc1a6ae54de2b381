package radix

// EntriesSlots writes, for every owner of the index whose rank r has 0 ≤ slot[r] < len(dst),
// the number of blocks it holds (all tiers, as OwnerEntries) into dst[slot[r]]. Entries of dst
// for owners the index does not know are left as they are (the caller clears dst). Cost
// O(index owners), no allocation.
func (ix *Index) EntriesSlots(slot []int32, dst []int32) {
	for r, i := range ix.own.sorted {
		if r >= len(slot) {
			return
		}
		if s := slot[r]; s >= 0 && int(s) < len(dst) {
			dst[s] = int32(min(ix.own.list[i].entries, 1<<31-1))
		}
	}
}
