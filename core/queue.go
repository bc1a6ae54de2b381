package core

import (
	"container/heap"
	"time"

	"github.com/kvselect/kvselect/core/engine"
)

// The router queue's order (Dynamo's scheduling/policy_queue semantics, single "default" policy
// class). A parked request is served before another when, in turn:
//
//  1. its strict_priority is larger;
//  2. its score is larger, where with arrival = seconds since the queue was created and
//     jump = max(priority_jump, 0):
//     fcfs: jump − arrival        (earliest first; priority_jump moves a request earlier)
//     lcfs: jump + arrival        (latest first)
//     wspt: (1 + jump) / max(1, isl − cached)   (least uncached work first)
//  3. it was parked first.
//
// Requests are queued per partition (model_name, routing_group): each partition has its own
// workers, so a busy partition never holds back another.

// waiter is one parked request. Fields other than index are set before it is pushed and never
// change; index is owned by the queue.
type waiter struct {
	req     *SelectRequest
	reserve bool
	part    engine.PartitionKey
	strict  uint32
	score   float64
	seq     uint64
	parked  time.Time
	// done receives the outcome exactly once (capacity 1, so dispatch never blocks).
	done chan waitResult
	// index is the waiter's position in its partition's heap, −1 once it left the queue.
	index int
}

// waitResult is a parked request's outcome.
type waitResult struct {
	resp *SelectResponse
	err  error
}

// waitHeap is one partition's parked requests, best first at index 0.
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

// routerQueue holds the parked requests of every partition. It is a plain data structure: the
// Service guards it with its mutex and decides when to park and dispatch.
type routerQueue struct {
	policy string // fcfs, lcfs or wspt
	start  time.Time
	parts  map[engine.PartitionKey]*waitHeap
	n      int
	seq    uint64
}

func newRouterQueue(policy string, start time.Time) routerQueue {
	return routerQueue{policy: policy, start: start, parts: map[engine.PartitionKey]*waitHeap{}}
}

// score is the policy score of a request parked at now (see the order above).
func (q *routerQueue) score(req *SelectRequest, probe engine.QueueProbe, now time.Time) float64 {
	jump := 0.0
	if req.PriorityJump != nil && *req.PriorityJump > 0 {
		jump = *req.PriorityJump
	}
	arrival := now.Sub(q.start).Seconds()
	switch q.policy {
	case "lcfs":
		return jump + arrival
	case "wspt":
		return (1 + jump) / float64(max(1, probe.ISL-min(probe.Cached, probe.ISL)))
	}
	return jump - arrival
}

// park adds a request measured by probe and returns its waiter.
func (q *routerQueue) park(req *SelectRequest, reserve bool, probe engine.QueueProbe, now time.Time) *waiter {
	q.seq++
	w := &waiter{req: req, reserve: reserve, part: probe.Partition, score: q.score(req, probe, now),
		seq: q.seq, parked: now, done: make(chan waitResult, 1)}
	if req.StrictPriority != nil {
		w.strict = *req.StrictPriority
	}
	h := q.parts[w.part]
	if h == nil {
		h = &waitHeap{}
		q.parts[w.part] = h
	}
	heap.Push(h, w)
	q.n++
	return w
}

// waiting reports whether partition k has parked requests (a newcomer must then queue behind
// them even if a rank is free: no bypass).
func (q *routerQueue) waiting(k engine.PartitionKey) bool {
	h := q.parts[k]
	return h != nil && h.Len() > 0
}

// head returns partition k's next request, or nil.
func (q *routerQueue) head(k engine.PartitionKey) *waiter {
	if h := q.parts[k]; h != nil && h.Len() > 0 {
		return (*h)[0]
	}
	return nil
}

// remove takes w out of the queue; it reports false when w had already left it.
func (q *routerQueue) remove(w *waiter) bool {
	if w.index < 0 {
		return false
	}
	h := q.parts[w.part]
	heap.Remove(h, w.index)
	q.n--
	if h.Len() == 0 {
		delete(q.parts, w.part)
	}
	return true
}

// partitions appends the keys of the partitions with parked requests to dst.
func (q *routerQueue) partitions(dst []engine.PartitionKey) []engine.PartitionKey {
	for k := range q.parts {
		dst = append(dst, k)
	}
	return dst
}
