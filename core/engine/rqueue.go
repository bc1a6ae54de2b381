package engine

import (
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// The router queue's order (Dynamo's scheduling/policy_queue semantics). Requests are queued per
// partition (model_name, routing_group) — each partition has its own workers, so a busy one
// never holds back another — and, inside a partition, per policy class (rqueue_policy.go).
// This file is the queue's data structure; admission and dispatch are rqueue_admit.go.
//
// Within a class, a request is served before another when, in turn:
//
//  1. its strict_priority is larger;
//  2. its score is larger, where with arrival = seconds since the first park,
//     jump = max(priority_jump, 0) and cost = max(1, isl − cached):
//     fcfs: jump − arrival        (earliest first; priority_jump moves a request earlier)
//     lcfs: jump + arrival        (latest first; the synthetic class only)
//     wspt: (1 + jump) / cost     (least uncached work first)
//     aging: jump − (arrival + k·service)  (earliest deadline first; kvselect's, see below)
//  3. it was parked first.
//
// aging is earliest-deadline-first on proportional deadlines: service is the request's
// estimated prefill in seconds at the learned speed (QueueProbe.ServiceMS), k is AgingSlowdown.
// A request's priority is its wait minus k·service, so two parked requests never swap while they
// wait (a plain heap holds the order). Due-date order minimises the maximum lateness (Jackson's
// rule; EDF, Horn 1974), so this best honours a uniform slowdown target k (bounded slowdown,
// Harchol-Balter et al.): k = 0 is FCFS, k → ∞ shortest-service-first. Unlike wspt, a long
// prompt cannot starve: nothing arriving more than k·service after it can pass it.
//
// Across the classes of a partition, deficit round robin in configuration order: a visited
// class whose head may be dispatched earns its quantum (in uncached tokens) when the head costs
// more than its deficit, and pops the head when the deficit covers it; after a full round
// without a pop, every dispatchable class earns the fewest whole quanta that let one pop. A
// class that keeps a positive deficit after a pop is visited first next time, without a new
// quantum; an empty class's deficit is reset.
//
// A pinned request waits in its rank's lane instead (it can only go when that rank has room):
// lanes are FIFO in the same order, outside the round robin, and their heads are tried after the
// classes'. Pinned requests count toward their class's queue limits.

// waiter is one parked request. Fields other than index are set before it is pushed and never
// change; index is owned by the queue. prompt is the prompt normalised when the request was
// parked: dispatch probes reuse it instead of re-hashing.
type waiter struct {
	req     *SelectRequest
	reserve bool
	prompt  parkedPrompt
	part    PartitionKey
	class   int
	pinned  *kvwire.Owner // the lane of a pinned request; nil otherwise
	isl     uint64
	cached  uint64
	cost    uint64 // max(1, isl − cached)
	strict  uint32
	score   float64
	seq     uint64
	parked  time.Time
	// index is the waiter's position in its class's heap, −1 once it left the queue.
	index int
}

// waitHeap is one class's parked requests, best first at index 0.
type waitHeap []*waiter

func (h waitHeap) Len() int { return len(h) }
func (h waitHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.strict != b.strict {
		return a.strict > b.strict
	}
	if a.score != b.score {
		return a.score > b.score
	}
	return a.seq < b.seq
}
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waitHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waitHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}

// classQueue is one class's parked requests, its deficit and its usage (for limits).
type classQueue struct {
	heap                   waitHeap
	deficit                uint64
	count, isl, cachedToks uint64
}

// partQueue is one partition's classes under one profile.
type partQueue struct {
	prof    *policyProfile
	classes []classQueue // parallel to prof.classes
	lanes   map[kvwire.Owner]*waitHeap
	cursor  int  // the class deficit round robin visits first
	carry   bool // the cursor class keeps a deficit: no new quantum on its next visit
	n       int
	ok      []int8 // dispatchability scratch: 0 unknown, 1 yes, −1 no
}

// routerQueue holds the parked requests of every partition. It is a plain data structure: the
// engine's admission (rqueue_admit.go) decides when to park and dispatch. start is the time of
// the first park (arrival times are measured from it); seq numbers parks, and is a parked
// request's Ticket; parkedIDs holds the selection ids of parked select_and_reserve requests.
type routerQueue struct {
	start     time.Time
	parts     map[PartitionKey]*partQueue
	tickets   map[Ticket]*waiter // every parked request
	parkedIDs map[string]struct{}
	seq       uint64
	keys      []PartitionKey // DrainQueue scratch
}

func newRouterQueue(start time.Time) routerQueue {
	return routerQueue{start: start, parts: map[PartitionKey]*partQueue{}, tickets: map[Ticket]*waiter{}, parkedIDs: map[string]struct{}{}}
}

// score is the policy score of a request parked at now (see the order above).
func (q *routerQueue) score(policy string, req *SelectRequest, cost uint64, serviceMS float64, now time.Time) float64 {
	jump := 0.0
	if req.PriorityJump != nil && *req.PriorityJump > 0 {
		jump = *req.PriorityJump
	}
	arrival := now.Sub(q.start).Seconds()
	switch policy {
	case "lcfs":
		return jump + arrival
	case "wspt":
		return (1 + jump) / float64(cost)
	case QueueAging:
		return jump - (arrival + AgingSlowdown*max(0, serviceMS)/1000)
	}
	return jump - arrival
}

// part returns partition k's queue, creating it under profile prof.
func (q *routerQueue) part(k PartitionKey, prof *policyProfile) *partQueue {
	pq := q.parts[k]
	if pq == nil {
		pq = &partQueue{prof: prof, classes: make([]classQueue, len(prof.classes)), ok: make([]int8, len(prof.classes))}
		q.parts[k] = pq
	}
	return pq
}

// limitError is the 429 of a class whose queue limit is reached (nil when none is).
func (q *routerQueue) limitError(k PartitionKey, prof *policyProfile, class int, probe QueueProbe) error {
	c := prof.classes[class]
	var usage [3]uint64
	if pq := q.parts[k]; pq != nil && pq.prof == prof {
		cq := &pq.classes[class]
		usage = [3]uint64{cq.count, cq.isl, cq.cachedToks}
	}
	for i, per := range c.limits {
		if per == nil {
			continue
		}
		limit := satMul(*per, uint64(probe.Workers))
		if usage[i] >= limit {
			return &Error{Kind: ErrOverloaded,
				Msg:     fmt.Sprintf("router policy class %q queue %s limit reached (current=%d, limit=%d)", c.name, limitKinds[i], usage[i], limit),
				Details: QueueRejection{PolicyClass: c.name, LimitKind: limitKinds[i], Current: usage[i], Limit: limit}}
		}
	}
	return nil
}

// park adds a request of class class (of profile prof) measured by probe, and returns its
// waiter.
func (q *routerQueue) park(req *SelectRequest, reserve bool, prof *policyProfile, class int, probe QueueProbe, now time.Time) *waiter {
	q.seq++
	if q.start.IsZero() {
		q.start = now
	}
	cached := min(probe.Cached, probe.ISL)
	cost := max(1, probe.ISL-cached)
	w := &waiter{req: req, reserve: reserve, part: probe.Partition, class: class, isl: probe.ISL, cached: cached,
		cost: cost, score: q.score(prof.classes[class].policy, req, cost, probe.ServiceMS, now), seq: q.seq, parked: now}
	if req.StrictPriority != nil {
		w.strict = *req.StrictPriority
	}
	pq := q.part(w.part, prof)
	cq := &pq.classes[class]
	if pw := req.PinnedWorker; pw != nil {
		w.pinned = &kvwire.Owner{Worker: *pw.WorkerID, Rank: *pw.DPRank}
		if pq.lanes == nil {
			pq.lanes = map[kvwire.Owner]*waitHeap{}
		}
		lane := pq.lanes[*w.pinned]
		if lane == nil {
			lane = &waitHeap{}
			pq.lanes[*w.pinned] = lane
		}
		heap.Push(lane, w)
	} else {
		heap.Push(&cq.heap, w)
	}
	cq.count++
	cq.isl += w.isl
	cq.cachedToks += w.cached
	pq.n++
	q.tickets[Ticket(w.seq)] = w
	if reserve && req.SelectionID != nil {
		q.parkedIDs[*req.SelectionID] = struct{}{}
	}
	return w
}

// waiting reports whether a newcomer of class class — pinned to rank pinned, if not nil — must
// queue behind parked requests even if a rank is free (no bypass): its class has parked
// requests, or its rank's lane has.
func (q *routerQueue) waiting(k PartitionKey, class int, pinned *PinnedWorker) bool {
	pq := q.parts[k]
	if pq == nil {
		return false
	}
	if pinned != nil {
		lane := pq.lanes[kvwire.Owner{Worker: *pinned.WorkerID, Rank: *pinned.DPRank}]
		return lane != nil && lane.Len() > 0
	}
	return class < len(pq.classes) && pq.classes[class].heap.Len() > 0
}

// remove takes w and its selection id out of the queue; false when w had already left it.
func (q *routerQueue) remove(w *waiter) bool {
	if w.index < 0 {
		return false
	}
	pq := q.parts[w.part]
	cq := &pq.classes[w.class]
	cq.count--
	cq.isl -= w.isl
	cq.cachedToks -= w.cached
	if w.pinned != nil {
		lane := pq.lanes[*w.pinned]
		heap.Remove(lane, w.index)
		if lane.Len() == 0 {
			delete(pq.lanes, *w.pinned)
		}
	} else if heap.Remove(&cq.heap, w.index); cq.heap.Len() == 0 {
		cq.deficit = 0
		if pq.cursor == w.class {
			pq.carry = false
		}
	}
	pq.n--
	delete(q.tickets, Ticket(w.seq))
	if w.reserve && w.req.SelectionID != nil {
		delete(q.parkedIDs, *w.req.SelectionID)
	}
	if pq.n == 0 {
		delete(q.parts, w.part)
	}
	return true
}

// next picks partition k's next request to dispatch by deficit round robin over the classes
// whose head dispatchable accepts, charges it, and returns it (still queued: the caller
// removes it). It returns nil when no head may be dispatched.
func (q *routerQueue) next(k PartitionKey, dispatchable func(*waiter) bool) *waiter {
	pq := q.parts[k]
	if pq == nil {
		return nil
	}
	nc := len(pq.classes)
	clear(pq.ok)
	can := func(i int) bool {
		if pq.ok[i] == 0 {
			pq.ok[i] = -1
			if dispatchable(pq.classes[i].heap[0]) {
				pq.ok[i] = 1
			}
		}
		return pq.ok[i] > 0
	}
	for step := range nc {
		i := (pq.cursor + step) % nc
		cq := &pq.classes[i]
		if cq.heap.Len() == 0 {
			cq.deficit = 0
			continue
		}
		if !can(i) {
			continue
		}
		cost := cq.heap[0].cost
		if cost > cq.deficit && !(step == 0 && pq.carry) {
			cq.deficit = satAdd(cq.deficit, pq.prof.classes[i].quantum)
		}
		if cost <= cq.deficit {
			return pq.take(i)
		}
	}
	// A full round without a pop: grant every dispatchable class the fewest whole quanta that
	// let one of them pop, then take the first that can, in round order.
	rounds := uint64(math.MaxUint64)
	for i := range nc {
		cq := &pq.classes[i]
		if cq.heap.Len() == 0 || !can(i) {
			continue
		}
		quantum := pq.prof.classes[i].quantum
		short := cq.heap[0].cost - min(cq.deficit, cq.heap[0].cost)
		need := short / quantum
		if short%quantum != 0 {
			need++
		}
		rounds = min(rounds, need)
	}
	if rounds == math.MaxUint64 {
		return nil
	}
	for i := range nc {
		if cq := &pq.classes[i]; cq.heap.Len() > 0 && can(i) {
			cq.deficit = satAdd(cq.deficit, satMul(pq.prof.classes[i].quantum, rounds))
		}
	}
	for step := range nc {
		i := (pq.cursor + step) % nc
		if cq := &pq.classes[i]; cq.heap.Len() > 0 && can(i) && cq.heap[0].cost <= cq.deficit {
			return pq.take(i)
		}
	}
	return nil
}

// nextLane returns the first pinned lane head of partition k, in (worker, rank) order, that
// dispatchable accepts (still queued: the caller removes it), or nil.
func (q *routerQueue) nextLane(k PartitionKey, dispatchable func(*waiter) bool) *waiter {
	pq := q.parts[k]
	if pq == nil || len(pq.lanes) == 0 {
		return nil
	}
	owners := slices.SortedFunc(maps.Keys(pq.lanes), kvwire.Owner.Compare)
	for _, o := range owners {
		if w := (*pq.lanes[o])[0]; dispatchable(w) {
			return w
		}
	}
	return nil
}

// take charges class i for its head and moves the cursor; the head stays queued.
func (pq *partQueue) take(i int) *waiter {
	cq := &pq.classes[i]
	w := cq.heap[0]
	cq.deficit -= w.cost
	pq.carry = cq.heap.Len() > 1 && cq.deficit > 0
	if pq.carry {
		pq.cursor = i
	} else {
		pq.cursor = (i + 1) % len(pq.classes)
	}
	return w
}

// byClass counts the parked requests per policy class name over every partition (nil when none
// is parked).
func (q *routerQueue) byClass() map[string]int {
	if len(q.tickets) == 0 {
		return nil
	}
	m := map[string]int{}
	for _, pq := range q.parts {
		for i := range pq.classes {
			if n := pq.classes[i].count; n > 0 {
				m[pq.prof.classes[i].name] += int(n)
			}
		}
	}
	return m
}

// partitions appends the keys of the partitions with parked requests to dst, in key order.
func (q *routerQueue) partitions(dst []PartitionKey) []PartitionKey {
	n := len(dst)
	for k := range q.parts {
		dst = append(dst, k)
	}
	slices.SortFunc(dst[n:], PartitionKey.Compare)
	return dst
}

// all appends every parked request to dst, in park order.
func (q *routerQueue) all(dst []*waiter) []*waiter {
	n := len(dst)
	for _, w := range q.tickets {
		dst = append(dst, w)
	}
	slices.SortFunc(dst[n:], func(a, b *waiter) int { return cmp.Compare(a.seq, b.seq) })
	return dst
}

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func satMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}
