package engine

import (
	"fmt"
	"testing"
	"time"
)

// Tests of the router queue's order (pure, table-driven).

// Tests of the router queue: the order (pure, table-driven) and the Service's parking and
// dispatch with a real  Waiting callers run in goroutines; the tests synchronise by
// polling Stats().Queue with a deadline, never by sleeping.

// always is a dispatchability test that accepts every head.
func always(*waiter) bool { return true }

// drainOrder pops partition k's requests in dispatch order.
func drainOrder(q *routerQueue, k PartitionKey, names map[*waiter]string) string {
	got := ""
	for w := q.next(k, always); w != nil; w = q.next(k, always) {
		got += names[w]
		if !q.remove(w) || q.remove(w) {
			panic("remove must succeed once")
		}
	}
	return got
}

func TestRouterQueueOrder(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type item struct {
		name   string
		at     time.Duration // parked at t0 + at
		jump   float64
		strict uint32
		isl    uint64
		cached uint64
	}
	cases := []struct {
		policy string
		items  []item
		want   string
	}{
		{"fcfs", []item{{name: "a"}, {name: "b", at: 1}, {name: "c", at: 2}}, "abc"},
		{"fcfs", []item{{name: "a"}, {name: "b", at: time.Second, jump: 2}, {name: "c", at: 2 * time.Second}}, "bac"},
		{"fcfs", []item{{name: "a"}, {name: "b", at: 1, strict: 1}, {name: "c", at: 2, strict: 2}}, "cba"},
		{"fcfs", []item{{name: "a", jump: -5}, {name: "b", at: 1}}, "ab"}, // negative jumps count as 0
		{"lcfs", []item{{name: "a"}, {name: "b", at: time.Second}, {name: "c", at: 2 * time.Second}}, "cba"},
		{"lcfs", []item{{name: "a", strict: 1}, {name: "b", at: time.Second}}, "ab"},
		// wspt: least uncached work first; (1+jump) weights it.
		{"wspt", []item{{name: "a", isl: 1000}, {name: "b", isl: 1000, cached: 900}, {name: "c", isl: 50}}, "cba"},
		{"wspt", []item{{name: "a", isl: 100}, {name: "b", isl: 300, jump: 3}}, "ba"},
		{"wspt", []item{{name: "a", isl: 10, cached: 10}, {name: "b", isl: 0}}, "ab"}, // both clamp to 1: parked first wins
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%d-%s", i, tc.policy), func(t *testing.T) {
			q := newRouterQueue(t0)
			prof := syntheticProfile(&Config{QueuePolicy: tc.policy, QueueThreshold: ptr(0.5)})
			k := PartitionKey{Model: "m", Group: "g"}
			names := map[*waiter]string{}
			for _, it := range tc.items {
				req := &SelectRequest{PriorityJump: ptr(it.jump), StrictPriority: ptr(it.strict)}
				w := q.park(req, false, prof, 0, QueueProbe{Partition: k, ISL: it.isl, Cached: it.cached}, t0.Add(it.at))
				names[w] = it.name
			}
			if got := drainOrder(&q, k, names); got != tc.want || len(q.tickets) != 0 || q.waiting(k, 0, nil) {
				t.Fatalf("order %q, want %q (n=%d)", got, tc.want, len(q.tickets))
			}
		})
	}
}

func TestRouterQueuePartitionsAndRemove(t *testing.T) {
	t0 := time.Unix(0, 0)
	q := newRouterQueue(t0)
	prof := syntheticProfile(&Config{QueueThreshold: ptr(0.5)})
	a, b := PartitionKey{Model: "a"}, PartitionKey{Model: "b"}
	var ws []*waiter
	for i := range 6 {
		k := a
		if i%2 == 1 {
			k = b
		}
		ws = append(ws, q.park(&SelectRequest{}, false, prof, 0, QueueProbe{Partition: k}, t0.Add(time.Duration(i))))
	}
	// Removing from the middle keeps the order of the rest; partitions are independent.
	q.remove(ws[2])
	if q.next(a, always) != ws[0] || q.next(b, always) != ws[1] || len(q.tickets) != 5 {
		t.Fatal("heads after removing from the middle")
	}
	q.remove(ws[0])
	if q.next(a, always) != ws[4] {
		t.Fatal("a's next head")
	}
	q.remove(ws[4])
	if q.waiting(a, 0, nil) || !q.waiting(b, 0, nil) || len(q.partitions(nil)) != 1 || q.next(a, always) != nil {
		t.Fatal("an emptied partition must disappear")
	}
	// A head that may not be dispatched holds its class back.
	if q.next(b, func(*waiter) bool { return false }) != nil {
		t.Fatal("a blocked head must not be returned")
	}
}

// Tests of the aging order (rqueue.go): earliest deadline first, deadline = arrival +
// AgingSlowdown × estimated service time.

func TestRouterQueueAgingOrder(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	k := AgingSlowdown
	type item struct {
		name    string
		at      time.Duration
		service float64 // ms
		jump    float64
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	cases := []struct {
		items []item
		want  string
	}{
		// Arrived together: shortest service first (wspt's order).
		{[]item{{name: "a", service: 900}, {name: "b", service: 100}, {name: "c", service: 400}}, "bca"},
		// b arrives after a's deadline minus b's service: a's head start wins.
		{[]item{{name: "a", service: 900}, {name: "b", at: ms(k*900 - k*100 + 1), service: 100}}, "ab"},
		// b arrives just inside it: the shorter one passes.
		{[]item{{name: "a", service: 900}, {name: "b", at: ms(k*900 - k*100 - 1), service: 100}}, "ba"},
		// priority_jump moves a deadline earlier by that many seconds, as in fcfs.
		{[]item{{name: "a", service: 100}, {name: "b", at: time.Second, service: 100, jump: 2}}, "ba"},
		// Equal deadlines: parked first.
		{[]item{{name: "a", service: 200}, {name: "b", at: ms(k * 100), service: 100}}, "ab"},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			q := newRouterQueue(t0)
			prof := syntheticProfile(&Config{QueuePolicy: QueueAging, QueueThreshold: ptr(0.5)})
			part := PartitionKey{Model: "m", Group: "g"}
			names := map[*waiter]string{}
			for _, it := range tc.items {
				req := &SelectRequest{PriorityJump: ptr(it.jump)}
				w := q.park(req, false, prof, 0, QueueProbe{Partition: part, ISL: 1000, ServiceMS: it.service}, t0.Add(it.at))
				names[w] = it.name
			}
			if got := drainOrder(&q, part, names); got != tc.want {
				t.Fatalf("order %q, want %q", got, tc.want)
			}
		})
	}
}

// starve parks one long request behind a backlog of short ones and then, every tick, parks a
// new short request and dispatches one. It returns the tick at which the long request left the
// queue (−1 if it never did within ticks) and the latest arrival time, relative to the long
// one's, of a short request dispatched before it.
func starve(policy string, longMS, shortMS float64, tick time.Duration, ticks int) (int, time.Duration) {
	t0 := time.Unix(0, 0)
	q := newRouterQueue(t0)
	prof := syntheticProfile(&Config{QueuePolicy: policy, QueueThreshold: ptr(0.5)})
	part := PartitionKey{Model: "m", Group: "g"}
	probe := func(ms float64) QueueProbe {
		return QueueProbe{Partition: part, ISL: uint64(ms * 100), ServiceMS: ms}
	}
	arrived := map[*waiter]time.Duration{}
	for i := range 5 { // the backlog
		arrived[q.park(&SelectRequest{}, false, prof, 0, probe(shortMS), t0.Add(-time.Duration(i)*tick))] = -time.Duration(i) * tick
	}
	long := q.park(&SelectRequest{}, false, prof, 0, probe(longMS), t0)
	var latest time.Duration
	for i := 1; i <= ticks; i++ {
		at := time.Duration(i) * tick
		arrived[q.park(&SelectRequest{}, false, prof, 0, probe(shortMS), t0.Add(at))] = at
		w := q.next(part, always)
		q.remove(w)
		if w == long {
			return i, latest
		}
		latest = max(latest, arrived[w])
	}
	return -1, latest
}

// TestRouterQueueAgingBoundsWait: short requests keep arriving as fast as the queue drains, so
// wspt never serves the long one; aging serves it once the shorts that arrive are due after it,
// and no short request that arrived later than k·(long − short) after it is served first.
func TestRouterQueueAgingBoundsWait(t *testing.T) {
	const longMS, shortMS = 2000.0, 50.0
	tick := 20 * time.Millisecond
	if at, _ := starve("wspt", longMS, shortMS, tick, 1000); at != -1 {
		t.Fatalf("wspt served the long request at tick %d; the test needs a starving baseline", at)
	}
	at, latest := starve(QueueAging, longMS, shortMS, tick, 1000)
	bound := time.Duration(AgingSlowdown * (longMS - shortMS) * float64(time.Millisecond))
	if at < 0 {
		t.Fatal("aging never served the long request")
	}
	if latest > bound {
		t.Fatalf("a short request that arrived %v after the long one passed it; bound %v", latest, bound)
	}
	// It is served within its bound: the backlog plus the shorts due before it.
	if limit := 5 + int(bound/tick) + 1; at > limit {
		t.Fatalf("long request served at tick %d, want ≤ %d", at, limit)
	}
	// And short work still overtakes it (it is not FCFS).
	if at <= 6 {
		t.Fatalf("long request served at tick %d: shorter work that arrived soon after did not pass it", at)
	}
}
