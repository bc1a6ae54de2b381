package sim

import (
	"slices"
	"testing"
)

// releaseRecorder records the order in which an EnginePolicy's router queue dispatches.
type releaseRecorder struct {
	*EnginePolicy
	order []int
}

func (r *releaseRecorder) Release(v *View, admit func(id, worker int)) {
	r.EnginePolicy.Release(v, func(id, w int) {
		r.order = append(r.order, id)
		admit(id, w)
	})
}

// queuedPolicy is kvselect's policy with a router queue of this order and threshold (a fraction
// of BatchedTokens).
func queuedPolicy(t *testing.T, order string, threshold float64, workers int) *releaseRecorder {
	t.Helper()
	c := KVSelectConfig()
	c.QueueThreshold, c.QueuePolicy = &threshold, order
	p, err := NewEnginePolicy("q", c, workers, 1)
	if err != nil {
		t.Fatal(err)
	}
	return &releaseRecorder{EnginePolicy: p}
}

// uncachedRequest is a prompt of n blocks that shares nothing with other requests.
func uncachedRequest(at float64, id uint64, blocks int) Request {
	r := Request{ArrivalMS: at, Input: blocks * TraceBlockTokens, Output: 4}
	for b := range blocks {
		r.Blocks = append(r.Blocks, id<<16|uint64(b))
	}
	return r
}

func TestRouterQueueOrder(t *testing.T) {
	// One worker, threshold 0: busy while any booked prompt token awaits prefill, so requests
	// go one at a time. Request 0 starts at once; 1–3 arrive while it runs and are parked.
	reqs := []Request{
		uncachedRequest(0, 1, 8),
		uncachedRequest(1, 2, 6),
		uncachedRequest(2, 3, 2),
		uncachedRequest(3, 4, 4),
	}
	for _, tc := range []struct {
		order string
		want  []int
	}{
		{"fcfs", []int{1, 2, 3}},
		{"lcfs", []int{3, 2, 1}},
		{"wspt", []int{2, 3, 1}}, // least uncached work first
	} {
		t.Run(tc.order, func(t *testing.T) {
			p := queuedPolicy(t, tc.order, 0, 1)
			res, err := Run(Config{Workers: 1, CapacityBlocks: 100}, reqs, p, p)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.order, tc.want) {
				t.Fatalf("dispatch order %v, want %v", p.order, tc.want)
			}
			if res.Rejected != 0 || res.Queued != 3 {
				t.Fatalf("rejected %d queued %d, want 0 and 3", res.Rejected, res.Queued)
			}
		})
	}
}

func TestRouterQueueHoldsOnlyWhenEveryRankIsBusy(t *testing.T) {
	// Two workers: the second request finds the second worker idle and is never parked.
	reqs := []Request{uncachedRequest(0, 1, 8), uncachedRequest(1, 2, 8), uncachedRequest(2, 3, 1)}
	p := queuedPolicy(t, "fcfs", 0, 2)
	res, err := Run(Config{Workers: 2, CapacityBlocks: 100}, reqs, p, p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.order, []int{2}) || res.Queued != 1 || res.Rejected != 0 {
		t.Fatalf("released %v, queued %d, rejected %d; want [2], 1, 0", p.order, res.Queued, res.Rejected)
	}
}

// TestRouterQueueBurst: under a burst of mixed, uncached prompts that saturates every worker, a
// wspt router queue serves short prompts first, which shortens the median and mean TTFT against
// immediate dispatch (where each worker's FIFO holds the burst in arrival order), and admits
// every request.
func TestRouterQueueBurst(t *testing.T) {
	var reqs []Request
	for i := range 400 {
		blocks := 1 + (i*7)%14 // 512 to 7,168 tokens
		reqs = append(reqs, uncachedRequest(float64(i), uint64(i+1), blocks))
	}
	cfg := Config{Workers: 4, CapacityBlocks: 10000, Seed: 1}
	direct, err := RunPolicy("kvselect", cfg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	queued, err := RunPolicy("kvselect-queue", cfg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("direct p50 %.0f mean %.0f; wspt queue p50 %.0f mean %.0f", direct.TTFTP50, direct.TTFTMean, queued.TTFTP50, queued.TTFTMean)
	if queued.Rejected != 0 || direct.Rejected != 0 {
		t.Fatalf("rejected %d / %d, want none", direct.Rejected, queued.Rejected)
	}
	if queued.TTFTMean > 0.8*direct.TTFTMean || queued.TTFTP50 > 0.8*direct.TTFTP50 {
		t.Fatalf("wspt queue p50 %.0f / mean %.0f not clearly below immediate dispatch's %.0f / %.0f",
			queued.TTFTP50, queued.TTFTMean, direct.TTFTP50, direct.TTFTMean)
	}
}

func TestRouterQueueRejectsPolicyClasses(t *testing.T) {
	c := KVSelectConfig()
	c.PolicyConfig = "classes: {}"
	if _, err := NewEnginePolicy("q", c, 1, 1); err == nil {
		t.Fatal("NewEnginePolicy accepted router policy classes the simulator does not model")
	}
}

// scriptedHolder sends request 0 to worker 0, holds the others, and on every Release calls
// admit with each pair of release in turn (once).
type scriptedHolder struct {
	release [][2]int
	done    bool
}

func (*scriptedHolder) Name() string { return "scripted" }
func (*scriptedHolder) Pick(_ *View, id int, _ *Request) int {
	if id == 0 {
		return 0
	}
	return Held
}
func (*scriptedHolder) PrefillDone(int) {}
func (*scriptedHolder) Done(int)        {}
func (h *scriptedHolder) Release(_ *View, admit func(id, worker int)) {
	if !h.done {
		h.done = true
		for _, r := range h.release {
			admit(r[0], r[1])
		}
	}
}

func TestHolderContract(t *testing.T) {
	reqs := []Request{uncachedRequest(0, 1, 1), uncachedRequest(1, 2, 1), uncachedRequest(2, 3, 1)}
	cfg := Config{Workers: 1, CapacityBlocks: 10}
	for _, tc := range []struct {
		name     string
		release  [][2]int
		rejected int
		fails    bool
	}{
		{"released", [][2]int{{1, 0}, {2, 0}}, 0, false},
		{"held to the end", nil, 2, false},
		{"refused", [][2]int{{1, -1}}, 2, false},
		{"released twice", [][2]int{{1, 0}, {1, 0}}, 0, true},
		{"not held", [][2]int{{0, 0}}, 0, true},
		{"no such worker", [][2]int{{1, 3}}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(cfg, reqs, &scriptedHolder{release: tc.release}, nil)
			if tc.fails {
				if err == nil {
					t.Fatal("a broken Holder did not fail the run")
				}
				return
			}
			if err != nil || res.Rejected != tc.rejected {
				t.Fatalf("rejected %d (err %v), want %d", res.Rejected, err, tc.rejected)
			}
		})
	}
}
