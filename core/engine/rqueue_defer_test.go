package engine

import (
	"fmt"
	"testing"
	"time"
)

// deferFleet is two workers registering max_num_batched_tokens 1,000 under the router queue at
// threshold 1 in order policy, taught their queue order (teachOrder: reordering when teach),
// and then both holding a pending 2,000-token prefill: every rank is busy.
func deferFleet(t *testing.T, policy string, teach bool) (*Engine, time.Time) {
	t.Helper()
	cfg := KVSelectDefaults()
	threshold := 1.0
	cfg.QueueThreshold, cfg.QueuePolicy = &threshold, policy
	e := twoRankFleet(t, &cfg, func(s *WorkerSpec) { s.MaxNumBatchedTokens = ptr(uint64(1000)) })
	now := teachOrder(t, e, teach)
	pinned(t, e, "long-1", 1, toks(3_000_000, 2000), now)
	pinned(t, e, "long-2", 2, toks(4_000_000, 2000), now)
	return e, now
}

// TestAgingQueueDefersToReorderingEngines: with every rank busy, a select_and_reserve parks in
// the aging order on a partition whose engines serve in arrival order, and is answered at once
// on one learned to reorder (rqueue_defer.go), whose queue probe reports no busy pool; Dynamo's
// fcfs parks on both.
func TestAgingQueueDefersToReorderingEngines(t *testing.T) {
	for _, c := range []struct {
		policy      string
		teach, park bool
	}{
		{QueueAging, false, true},
		{QueueAging, true, false},
		{"fcfs", false, true},
		{"fcfs", true, true},
	} {
		name := fmt.Sprintf("%s, reordering %v", c.policy, c.teach)
		e, now := deferFleet(t, c.policy, c.teach)
		if got := e.PartitionStats()[0].QueueOrder.Reordered; got != c.teach {
			t.Fatalf("%s: partition reordered %v, want %v", name, got, c.teach)
		}
		probe, err := e.ProbeQueue(selReq("", toks(5_000_000, 64)))
		noErr(t, err)
		if probe.Busy != c.park {
			t.Errorf("%s: probe busy %v, want %v", name, probe.Busy, c.park)
		}
		resp, ticket, err := e.SelectQueued(selReq("new", toks(5_000_000, 64)), true, now)
		noErr(t, err)
		if parked := ticket != 0; parked != c.park || (resp == nil) != c.park {
			t.Errorf("%s: parked %v (response %v), want parked %v", name, parked, resp != nil, c.park)
		}
	}
}
