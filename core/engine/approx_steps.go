package engine

import (
	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// Approximate indexing in bounded steps. Recording a booking's blocks in the approximate index
// costs ~1–2 µs per block under the owner's lock, and so does pruning; a 65,536-block booking
// held the lock for ~100 ms and pushed every other selection's p99 to hundreds of
// milliseconds. A booking therefore records at most approxChunk blocks (and prunes at most
// approxChunk entries) at once; the rest waits in the partition's backlog, and the owner calls
// ApproxWork between lock holds until it reports no work left (core does so after every
// booking and on its sweep ticks). A prompt of up to approxChunk blocks is recorded at once, as
// before. Until the backlog drains, selections see the booking's leading blocks only: the
// approximate index is an estimate, and the rest follows within milliseconds.

// approxChunk bounds the blocks recorded or pruned per step (~1–8 ms under load with a full
// 2^20-entry index).
const approxChunk = 1024

// approxBacklogMax bounds the blocks waiting to be recorded per partition. Bookings arriving
// faster than the index can absorb them would otherwise queue without bound (each job keeps
// its prompt's hashes); past it a booking's blocks are not recorded in the approximate index
// (counted as kvselect_limit_events_total{limit="approx_backlog_dropped"}): the booking itself
// stands, only its cache estimate is lost.
const approxBacklogMax = 1 << 18

// approxJob is a booking's blocks not yet recorded.
type approxJob struct {
	o        kvwire.Owner
	blocks   []uint64 // the booking's public block hashes (shared with the booking, read only)
	deadline int64
	next     int    // blocks[:next] are recorded
	prev     uint64 // chained identity of blocks[next-1]
}

// enqueueApprox queues a booking's blocks and records the first step at once.
func (e *Engine) enqueueApprox(p *partition, o kvwire.Owner, blocks []uint64, deadline int64) {
	a := p.approx
	if a.pendingBlocks+len(blocks) > approxBacklogMax && a.pendingBlocks > 0 {
		e.bounds.ApproxBacklogDropped += uint64(len(blocks))
		return
	}
	a.pendingBlocks += len(blocks)
	a.backlog = append(a.backlog, approxJob{o: o, blocks: blocks, deadline: deadline})
	e.approxStep(p, approxChunk)
	if a.hasWork() && !a.listed {
		a.listed = true
		e.approxList = append(e.approxList, p)
	}
}

// ApproxWork performs up to budget blocks of deferred approximate indexing (recording and
// pruning) and reports whether work remains. Call it with the owner's lock held, and release
// the lock between calls.
func (e *Engine) ApproxWork(budget int) bool {
	for budget > 0 && len(e.approxList) > 0 {
		p := e.approxList[0]
		if p.approx == nil || e.parts[p.key] != p || !p.approx.hasWork() {
			if p.approx != nil {
				p.approx.listed = false
			}
			e.approxList = e.approxList[1:]
			continue
		}
		budget -= e.approxStep(p, budget)
	}
	if len(e.approxList) == 0 {
		e.approxList = nil
	}
	return len(e.approxList) > 0
}

// approxStep records and prunes up to budget blocks of p's backlog; it returns the work done.
func (e *Engine) approxStep(p *partition, budget int) int {
	a := p.approx
	done := 0
	for done < budget && a.bhead < len(a.backlog) {
		j := &a.backlog[a.bhead]
		before := j.next
		done += a.recordSome(p.index, j, budget-done)
		a.pendingBlocks -= j.next - before
		if j.next >= len(j.blocks) {
			a.backlog[a.bhead] = approxJob{}
			a.bhead++
		}
	}
	if a.bhead == len(a.backlog) {
		a.backlog, a.bhead = a.backlog[:0], 0
	}
	if len(a.deadline) > e.lim.ApproxMaxBlocks {
		a.pruning = true
	}
	if a.pruning {
		n := a.pruneSome(p.index, e.approxTarget(), max(budget-done, 1))
		done += n
		if n > 0 {
			e.bounds.ApproxPruned += uint64(n)
		}
		if len(a.deadline) <= e.approxTarget() {
			a.pruning = false
			e.bounds.ApproxPrunes++
		}
	}
	return max(done, 1)
}

// hasWork reports whether blocks wait to be recorded or a prune is in progress.
func (a *approxTTL) hasWork() bool { return a.bhead < len(a.backlog) || a.pruning }

// recordSome records up to n more blocks of j and returns how many it handled. A job whose
// recorded part lost its last block meanwhile (pruned, expired, owner dropped) is abandoned.
func (a *approxTTL) recordSome(ix *radix.Index, j *approxJob, n int) int {
	if j.next > 0 && !ix.Holds(j.o, j.prev) {
		a.pendingBlocks -= len(j.blocks) - j.next
		j.next = len(j.blocks)
		return 1
	}
	end := min(len(j.blocks), j.next+n)
	deadline := max(j.deadline, a.last)
	a.last = deadline
	a.chain = a.chain[:0]
	prev := j.prev
	for i := j.next; i < end; i++ {
		b := j.blocks[i]
		ext := b
		if i > 0 {
			ext = chainMix(prev, b)
		}
		prev = ext
		a.chain = append(a.chain, radix.StoredBlock{External: ext, Local: b})
		k := approxKey{j.o, ext}
		a.deadline[k] = deadline
		a.queue = append(a.queue, approxItem{k, deadline})
	}
	_ = ix.Store(j.o, kvwire.TierDevice, j.prev, j.next > 0, a.chain)
	handled := end - j.next
	j.next, j.prev = end, prev
	a.compact()
	return handled
}

// dropJobs forgets the backlog of owner o.
func (a *approxTTL) dropJobs(o kvwire.Owner) {
	for i := a.bhead; i < len(a.backlog); i++ {
		if j := &a.backlog[i]; j.o == o {
			a.pendingBlocks -= len(j.blocks) - j.next
			j.next = len(j.blocks)
		}
	}
}
