package core

import (
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/internal/poll"
)

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
