package sim

import (
	"container/heap"
	"fmt"

	"github.com/kvselect/kvselect/core/engine"
)

// routerQueue is an EnginePolicy's router queue, modelled on kvselect's service (core/queue.go,
// Dynamo's router-queue semantics) for one policy class without priorities, and configured by
// the same engine.Config fields the service reads (router_queue_threshold, router_queue_policy):
//
//   - a request is parked when every rank is busy under router_queue_threshold, which the
//     engine decides (engine.ProbeQueue, as the service does before parking), or when others
//     are parked (a newcomer never overtakes them);
//   - after every prefill completion and every finished request, parked requests go, best first,
//     for as long as the best one finds a rank that is not busy; each is then selected with the
//     index and load of that moment;
//   - fcfs serves the earliest arrival first, lcfs the latest, wspt the least uncached work
//     (prompt tokens minus the longest prefix cached on an eligible rank, measured when parked;
//     ties by arrival), aging the earliest deadline, arrival + engine.AgingSlowdown × the
//     request's estimated service time (engine.QueueProbe.ServiceMS, measured when parked),
//     as core/queue.go orders it.
//
// Parked requests own their hash slices. waiting is a heap, best first at index 0.
type routerQueue struct {
	order   string
	waiting []parked
}

// parked is one held request.
type parked struct {
	id    int
	score float64 // larger goes first
	req   engine.SelectRequest
}

func newRouterQueue(order string) (*routerQueue, error) {
	switch order {
	case "", "fcfs", "lcfs", "wspt", engine.QueueAging:
		return &routerQueue{order: order}, nil
	}
	return nil, fmt.Errorf("sim: unknown router queue policy %q", order)
}

// park holds request id, which arrived at now (simulated milliseconds) and has isl prompt tokens of which
// cached are cached on some rank and an estimated service time of serviceMS.
func (q *routerQueue) park(id int, req engine.SelectRequest, isl, cached uint64, serviceMS, now float64) {
	var score float64
	switch q.order {
	case engine.QueueAging:
		score = -(now + engine.AgingSlowdown*max(0, serviceMS))
	case "lcfs":
		score = float64(id) // ids are in arrival order
	case "wspt":
		score = 1 / float64(max(1, isl-min(cached, isl)))
	default:
		score = -float64(id)
	}
	heap.Push(q, parked{id: id, score: score, req: req})
}

// head is the best parked request; the queue must not be empty.
func (q *routerQueue) head() *parked { return &q.waiting[0] }

// pop removes the best parked request.
func (q *routerQueue) pop() { heap.Pop(q) }

func (q *routerQueue) Len() int { return len(q.waiting) }
func (q *routerQueue) Less(i, j int) bool {
	a, b := &q.waiting[i], &q.waiting[j]
	if a.score != b.score {
		return a.score > b.score
	}
	return a.id < b.id
}
func (q *routerQueue) Swap(i, j int) { q.waiting[i], q.waiting[j] = q.waiting[j], q.waiting[i] }
func (q *routerQueue) Push(x any)    { q.waiting = append(q.waiting, x.(parked)) }
func (q *routerQueue) Pop() any {
	x := q.waiting[len(q.waiting)-1]
	q.waiting = q.waiting[:len(q.waiting)-1]
	return x
}
