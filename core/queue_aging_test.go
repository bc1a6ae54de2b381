package core

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/internal/poll"
)

// Tests of the aging order (queue.go): earliest deadline first, deadline = arrival +
// engine.AgingSlowdown × estimated service time.

func TestRouterQueueAgingOrder(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	k := engine.AgingSlowdown
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
			prof := syntheticProfile(&engine.Config{QueuePolicy: engine.QueueAging, QueueThreshold: ptr(0.5)})
			part := engine.PartitionKey{Model: "m", Group: "g"}
			names := map[*waiter]string{}
			for _, it := range tc.items {
				req := &SelectRequest{PriorityJump: ptr(it.jump)}
				w := q.park(req, false, prof, 0, engine.QueueProbe{Partition: part, ISL: 1000, ServiceMS: it.service}, t0.Add(it.at))
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
	prof := syntheticProfile(&engine.Config{QueuePolicy: policy, QueueThreshold: ptr(0.5)})
	part := engine.PartitionKey{Model: "m", Group: "g"}
	probe := func(ms float64) engine.QueueProbe {
		return engine.QueueProbe{Partition: part, ISL: uint64(ms * 100), ServiceMS: ms}
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
	at, latest := starve(engine.QueueAging, longMS, shortMS, tick, 1000)
	bound := time.Duration(engine.AgingSlowdown * (longMS - shortMS) * float64(time.Millisecond))
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

// TestQueueAgingServiceOrder: the service parks in aging order with its clock. A long request
// parked well before a short one (more than its own estimated prefill earlier) goes first; one
// parked at the same instant as a short one goes after it, as in wspt.
func TestQueueAgingServiceOrder(t *testing.T) {
	for _, tc := range []struct {
		gap   time.Duration
		first string
	}{{10 * time.Second, "long"}, {0, "short"}} {
		t.Run(tc.gap.String(), func(t *testing.T) {
			var mu sync.Mutex
			now := time.Unix(1_700_000_000, 0)
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			svc := queueService(t, func(c *engine.Config) { c.QueueThreshold, c.QueuePolicy = ptr(0.5), engine.QueueAging })
			svc.clock = clock
			if _, err := svc.SelectAndReserve(selReq("big", 0, 60)); err != nil {
				t.Fatal(err)
			}
			out := make(chan outcome, 2)
			wait(t.Context(), svc, selReq("long", 1000, 80), true, out)
			poll.True(t, queueWait, "long parked", pendingIs(svc, 1))
			mu.Lock()
			now = now.Add(tc.gap)
			mu.Unlock()
			wait(t.Context(), svc, selReq("short", 2000, 52), true, out)
			poll.True(t, queueWait, "short parked", pendingIs(svc, 2))
			second := map[string]string{"long": "short", "short": "long"}[tc.first]
			for _, step := range []struct{ done, want string }{{"big", tc.first}, {tc.first, second}} {
				if err := svc.PrefillComplete(step.done); err != nil {
					t.Fatal(err)
				}
				if o := recv(t, out); o.id != step.want || o.err != nil {
					t.Fatalf("got %+v, want %s", o, step.want)
				}
			}
		})
	}
}
