package engine

import (
	"slices"
	"strconv"

	"github.com/kvselect/kvselect/kvwire"
)

// Incremental candidate maintenance: registering or removing one worker splices its ranks into
// or out of the sorted candidate list instead of rebuilding it (rebuild sorts every member: a
// partition of n workers cost O(n log n) per registration, 40k workers took minutes). The splice
// is a binary search plus one memmove of the tail, and the ordinal check looks only at the
// spliced region: both cands and the tracker's owners are sorted by (worker, rank) and hold the
// same set (every schedulable rank is added to both), so if they agreed before the change and
// agree on the region, they agree everywhere.

// workerSpan returns the half-open range of cands that belong to worker id.
func (p *partition) workerSpan(id uint64) (lo, hi int) {
	lo, _ = slices.BinarySearchFunc(p.cands, id, func(c candidate, id uint64) int { return cmpU64(c.w.id, id) })
	hi = lo
	for hi < len(p.cands) && p.cands[hi].w.id == id {
		hi++
	}
	return lo, hi
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// dropCands removes worker id's ranks from the candidates.
func (p *partition) dropCands(id uint64) {
	lo, hi := p.workerSpan(id)
	if lo == hi {
		p.candsChanged(lo, lo)
		return
	}
	p.capacity.tally(p.cands[lo:hi], false)
	p.cands = slices.Delete(p.cands, lo, hi)
	p.owners = slices.Delete(p.owners, lo, hi)
	p.candsChanged(lo, lo)
}

// addCands inserts w's ranks when w is schedulable (replacing any ranks of the same id).
func (p *partition) addCands(w *worker) {
	lo, hi := p.workerSpan(w.id)
	if lo != hi {
		p.capacity.tally(p.cands[lo:hi], false)
		p.cands = slices.Delete(p.cands, lo, hi)
		p.owners = slices.Delete(p.owners, lo, hi)
	}
	if !w.schedulable() {
		p.candsChanged(lo, lo)
		return
	}
	n := int(w.dpSize())
	add := make([]candidate, 0, n)
	own := make([]kvwire.Owner, 0, n)
	for r := w.startRank(); uint64(r) < uint64(w.startRank())+uint64(w.dpSize()); r++ {
		add = append(add, w.candidate(r))
		own = append(own, kvwire.Owner{Worker: w.id, Rank: r})
	}
	p.capacity.tally(add, true)
	p.cands = slices.Insert(p.cands, lo, add...)
	p.owners = slices.Insert(p.owners, lo, own...)
	p.candsChanged(lo, lo+n)
}

// candsChanged restores the derived state after cands[lo:hi] was spliced in (hi == lo: ranks
// were removed at lo): the ordinal check, the slot tables and the rank-name table.
func (p *partition) candsChanged(lo, hi int) {
	if p.ordOK && p.tracker.Owners() == len(p.owners) {
		ok := true
		for i := max(lo-1, 0); i < min(hi+1, len(p.owners)); i++ {
			if o, found := p.tracker.OwnerAt(i); !found || o != p.owners[i] {
				ok = false
				break
			}
		}
		p.ordOK = ok
	} else {
		p.ordOK = p.checkOrdinals()
	}
	p.ordVersion = p.tracker.Version()
	p.syncHeatWindow()
	p.syncFillScales(lo, hi)
	p.slots.reset()
	if p.predicted != nil {
		p.predicted.slots.reset()
	}
	for _, c := range p.cands[lo:hi] {
		p.ensureRankName(c.rank)
	}
	if len(p.cands) == 0 {
		p.rankNames, p.rankBase, p.rankSparse = p.rankNames[:0], 0, false
	}
}

// ensureRankName extends the rank-name table to cover r when the table stays dense (at most
// 4·candidates+64 entries, rebuild's rule); otherwise rankName formats r on demand.
func (p *partition) ensureRankName(r uint32) {
	if p.rankSparse {
		return
	}
	if len(p.rankNames) == 0 {
		p.rankBase = r
		p.rankNames = append(p.rankNames, strconv.FormatUint(uint64(r), 10))
		return
	}
	lo, hi := uint64(p.rankBase), uint64(p.rankBase)+uint64(len(p.rankNames))-1
	nlo, nhi := min(lo, uint64(r)), max(hi, uint64(r))
	if nlo == lo && nhi == hi {
		return
	}
	if nhi-nlo+1 > 4*uint64(len(p.cands))+64 {
		// Too sparse to tabulate: drop the table until the partition empties (rankName then
		// formats on demand, as rebuild decides for a sparse set).
		p.rankNames, p.rankBase, p.rankSparse = p.rankNames[:0], 0, true
		return
	}
	names := make([]string, 0, nhi-nlo+1)
	for x := nlo; x < lo; x++ {
		names = append(names, strconv.FormatUint(x, 10))
	}
	names = append(names, p.rankNames...)
	for x := hi + 1; x <= nhi; x++ {
		names = append(names, strconv.FormatUint(x, 10))
	}
	p.rankNames, p.rankBase = names, uint32(nlo)
}
