package sim

import (
	"math"
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

// serveOn runs r to completion on v's worker w alone, so that its engine truly caches r's
// full blocks (no KV event is delivered to anyone).
func serveOn(t *testing.T, v *View, w int, r *Request) {
	t.Helper()
	eng := v.sim.workers[w].eng
	fr := fleet.Request{ID: 0, Prompt: r.Input, Output: r.Output, Blocks: r.Blocks}
	eng.Submit(0, &fr, nil)
	for eng.NextAt() != math.Inf(1) {
		eng.Advance(nil)
	}
}

func TestLoadTrackerCountsOwnLifecycle(t *testing.T) {
	var lt loadTracker
	lt.route(0, 1, 1000)
	lt.route(1, 1, 500)
	lt.route(0, 0, 999) // already routed: ignored
	if lt.InFlight(1) != 2 || lt.PendingPrompt(1) != 1500 || lt.InFlight(0) != 0 {
		t.Fatalf("after routing: inflight %d pending %d (w0 %d)", lt.InFlight(1), lt.PendingPrompt(1), lt.InFlight(0))
	}
	lt.prefillDone(0)
	lt.prefillDone(0) // twice: no-op
	if lt.PendingPrompt(1) != 500 || lt.InFlight(1) != 2 {
		t.Fatalf("after prefill: pending %d inflight %d", lt.PendingPrompt(1), lt.InFlight(1))
	}
	lt.done(1) // finish without a first token report: both counters drop
	lt.done(1)
	lt.done(7) // never routed
	if lt.PendingPrompt(1) != 0 || lt.InFlight(1) != 1 {
		t.Fatalf("after done: pending %d inflight %d", lt.PendingPrompt(1), lt.InFlight(1))
	}
	// Least loaded: fewest in flight, then fewest pending tokens, then lowest index.
	lt.route(2, 2, 10)
	if w := lt.leastLoaded(4); w != 0 {
		t.Fatalf("least loaded %d, want 0", w)
	}
	lt.route(3, 0, 10)
	lt.route(4, 3, 5)
	// Every worker has 1 in flight; worker 1's is past its first token (0 pending tokens).
	if w := lt.leastLoaded(4); w != 1 {
		t.Fatalf("least loaded %d, want 1", w)
	}
}

func TestMaxOverlapSeesOnlyKVEvents(t *testing.T) {
	v := testView(3, 100)
	// Worker 2's cache truly holds the prefix, but no event said so: max-overlap cannot know.
	serveOn(t, v, 2, blocksReq(1025, 1, 2, 3))
	if v.sim.workers[2].eng.CachedPrefix([]uint64{1, 2}, 1025) != 1024 {
		t.Fatal("worker 2's engine does not cache the prefix")
	}
	p := NewMaxOverlap().(*maxOverlap)
	if w := p.Pick(v, 0, blocksReq(1024, 1, 2)); w != 0 {
		t.Fatalf("without events went to %d, want 0 (ties: least loaded, lowest index)", w)
	}
	p.Stored(1, 0, false, []uint64{1, 2})
	if w := p.Pick(v, 1, blocksReq(1024, 1, 2)); w != 1 {
		t.Fatalf("went to %d, want 1 (holds the prefix by KV events)", w)
	}
	// Ties on overlap go to the fewest in flight: worker 0 has 1, worker 2 none.
	if w := p.Pick(v, 2, blocksReq(512, 50)); w != 2 {
		t.Fatalf("tie went to %d, want 2", w)
	}
}

func TestObservedViewOverSimulation(t *testing.T) {
	// One legacy worker. Request 0 prefills 0–85 ms and decodes until ~350 ms; request 1 waits,
	// then prefills 85–117 ms; request 2 waits behind it.
	reqs := observedReqs()
	probe := &viewProbe{}
	if _, err := Run(Config{Workers: 1, CapacityBlocks: 16, Model: fleet.PresetLegacy}, reqs, probe, nil); err != nil {
		t.Fatal(err)
	}
	want := [][3]float64{
		{0, 0, 0},   // idle
		{1, 0, 0},   // request 0 prefilling; its blocks are stored (and pinned) when it ends
		{1, 1, 0},   // request 1 waiting
		{2, 1, 0.5}, // 0 decoding with 8 of 16 blocks pinned, 1 prefilling, 2 waiting
	}
	for i := range want {
		if probe.at[i] != want[i] {
			t.Fatalf("running, waiting, usage at arrival %d = %v, want %v", i, probe.at[i], want[i])
		}
	}
}

func TestObservedViewOverVLLMEngine(t *testing.T) {
	// One 8B worker of 16 blocks. Request 0's 4096-token prompt is one chunk (0 to ~136 ms),
	// its 8 blocks allocated when it is scheduled; requests 1 and 2 arrive during that step
	// and wait for the next one; so does request 3 at 100 ms.
	probe := &viewProbe{}
	if _, err := Run(Config{Workers: 1, CapacityBlocks: 16, Model: fleet.PresetH100_8B}, observedReqs(), probe, nil); err != nil {
		t.Fatal(err)
	}
	want := [][3]float64{{0, 0, 0}, {1, 0, 0.5}, {1, 1, 0.5}, {1, 2, 0.5}}
	for i := range want {
		if probe.at[i] != want[i] {
			t.Fatalf("running, waiting, usage at arrival %d = %v, want %v", i, probe.at[i], want[i])
		}
	}
}

// observedReqs are the requests of the observed-view tests.
func observedReqs() []Request {
	return []Request{
		{ArrivalMS: 0, Input: 4096, Output: 10, Blocks: []uint64{1, 2, 3, 4, 5, 6, 7, 8}},
		{ArrivalMS: 1, Input: 1024, Output: 10, Blocks: []uint64{20, 21}},
		{ArrivalMS: 2, Input: 512, Output: 1, Blocks: []uint64{30}},
		{ArrivalMS: 100, Input: 512, Output: 1, Blocks: []uint64{40}},
	}
}

// viewProbe routes everything to worker 0 and records the observable gauges at each arrival.
type viewProbe struct{ at [][3]float64 }

func (p *viewProbe) Name() string { return "probe" }
func (p *viewProbe) Pick(v *View, _ int, _ *Request) int {
	p.at = append(p.at, [3]float64{float64(v.RunningRequests(0)), float64(v.WaitingRequests(0)), v.KVCacheUsage(0)})
	return 0
}
func (p *viewProbe) PrefillDone(int) {}
func (p *viewProbe) Done(int)        {}
