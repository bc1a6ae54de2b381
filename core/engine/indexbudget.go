package engine

import (
	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// Per-rank KV-index budget. A publisher can announce any number of valid blocks (issue 15: a
// worker that declared 4,096 blocks reached 15M entries, 2.8 GB). Each rank's budget is its
// worker's total_kv_blocks × IndexHeadroom (default 1.25), or MaxIndexBlocksPerRank when the
// worker declared none; past it the rank's blocks are evicted oldest-stored first, and each
// eviction is counted (kvselect_limit_events_total{limit="index_rank_blocks"}).
//
// The order is a per-rank FIFO of stored external hashes. It may hold hashes the rank no longer
// holds (removed by events) and repeats (re-stored blocks); evicting skips those, and the FIFO
// is compacted (keeping each held hash's latest store) once it is more than twice the rank's
// entries, so its size follows the index's.

// storeOrder is one rank's FIFO of stored external hashes.
type storeOrder struct {
	q    []uint64
	head int
}

// rankBudget is the index budget of a rank of w.
func (e *Engine) rankBudget(w *worker) int {
	if tk := w.spec.TotalKVBlocks; tk != nil && *tk > 0 {
		b := float64(*tk) * e.lim.IndexHeadroom
		if b >= float64(unlimited) {
			return unlimited
		}
		return max(int(b), 1)
	}
	return e.lim.MaxIndexBlocksPerRank
}

// noteStored records blocks stored for o and evicts o's oldest blocks past its budget.
func (e *Engine) noteStored(p *partition, w *worker, o kvwire.Owner, blocks []radix.StoredBlock) {
	budget := e.rankBudget(w)
	if budget == unlimited {
		return
	}
	if p.order == nil {
		p.order = make(map[kvwire.Owner]*storeOrder)
	}
	so := p.order[o]
	if so == nil {
		so = &storeOrder{}
		p.order[o] = so
	}
	for _, b := range blocks {
		so.q = append(so.q, b.External)
	}
	held := p.index.OwnerEntries(o)
	for held > budget && so.head < len(so.q) {
		ext := so.q[so.head]
		so.head++
		if p.index.Evict(o, ext) {
			held--
			e.bounds.IndexEvicted++
		}
	}
	if n := len(so.q) - so.head; n > 2*held+1024 {
		so.compact(p, o)
	}
}

// compact keeps, in order, the stores of hashes o still holds, and of a hash stored more than
// once only its latest. The common FIFO holds no repeats (a worker re-announces a block only
// after removing it, and the removed store is dropped here), so the repeats pass — a map over
// the kept hashes — runs only when more stores are kept than o holds entries. Filtering first,
// in place, with the owner looked up once (radix.Index.KeepHeld), took compact from 21 % of
// KV-ingest CPU to 5 % and its allocations to none (BenchmarkKVIngestApply, core, 6 interleaved
// runs, benchstat: step-8x4blk 25.6 → 19.6 µs, −23 %; long-1x64blk 40.2 → 29.3 µs, −27 %;
// 2.5–5.2 KiB → 0 B per op).
func (so *storeOrder) compact(p *partition, o kvwire.Owner) {
	q := p.index.KeepHeld(o, so.q[so.head:])
	if len(q) > p.index.OwnerEntries(o) {
		last := make(map[uint64]int, len(q))
		for i, ext := range q {
			last[ext] = i
		}
		kept := q[:0]
		for i, ext := range q {
			if last[ext] == i {
				kept = append(kept, ext)
			}
		}
		q = kept
	}
	// The filtered hashes sit at the front of the old backing array; copy them down so the
	// array's head (already consumed) is reused.
	n := copy(so.q, q)
	so.q, so.head = so.q[:n], 0
	if cap(so.q) > 4*n+4096 { // a rank that shrank: give the memory back
		so.q = append([]uint64(nil), so.q...)
	}
}

// forgetOrder drops o's FIFO (its blocks were cleared).
func (p *partition) forgetOrder(o kvwire.Owner) {
	if p.order != nil {
		delete(p.order, o)
	}
}
