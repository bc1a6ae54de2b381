package sim

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/integration/fleet"
)

// tracePath finds a shared trace: $KVSELECT_TRACES, else shared/traces beside the repository
// (CI lays shared/ beside the clone) or beside the directory holding it (a git worktree).
func tracePath(t testing.TB, name string) string {
	t.Helper()
	dirs := []string{filepath.Join("..", "..", "..", "shared", "traces"), filepath.Join("..", "..", "..", "..", "shared", "traces")}
	if d := os.Getenv("KVSELECT_TRACES"); d != "" {
		dirs = append([]string{d}, dirs...)
	}
	var err error
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("trace %s missing in CI: %v", name, err)
	}
	t.Skipf("trace %s not available: %v", name, err)
	return ""
}

// qualityGate is the routing-quality contract the default policy must keep on a CI-size slice
// of the Mooncake conversation trace on the realistic 8B engine model, at a load where
// round-robin queues for tens of seconds: clearly more prefix reuse than round-robin (a
// cache-blind policy fails this), and a TTFT tail and mean far below those of the cache-blind
// policies (a load-blind policy, which piles work onto the workers its hashing or overlap
// favours, fails this).
func qualityGate(res, roundRobin, leastLoaded Result) (ok bool, why string) {
	switch {
	case res.Rejected > 0:
		return false, "rejected requests (a router that sheds load would look faster than it is)"
	case res.HitRate < roundRobin.HitRate+0.05:
		return false, "hit rate not ≥ round-robin + 5 points"
	case res.TTFTP99 > 0.5*leastLoaded.TTFTP99:
		return false, "TTFT p99 not ≤ 0.5 × least-loaded's"
	case res.TTFTMean > 0.5*roundRobin.TTFTMean:
		return false, "TTFT mean not ≤ 0.5 × round-robin's"
	}
	return true, ""
}

// gateConfig is the gate's fleet: 8 workers of the realistic 8B preset (its KV capacity),
// KV events 5 ms late, three times the trace's rate.
func gateConfig(model string) Config {
	return Config{Workers: 8, Speedup: 3, Seed: 42, Model: model, KVEventDelayMS: DefaultKVEventDelayMS}
}

func TestRoutingQualityGate(t *testing.T) {
	reqs, err := LoadTrace(tracePath(t, "mooncake_conversation_trace.jsonl"), 2000)
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateConfig(fleet.PresetH100_8B)
	run := func(name string) Result {
		r, err := RunPolicy(name, cfg, reqs)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-14s hit %.1f%%  TTFT p50 %.0f ms  p99 %.0f ms  mean %.0f ms  preempted %d", name, 100*r.HitRate, r.TTFTP50, r.TTFTP99, r.TTFTMean, r.Preemptions)
		return r
	}
	rr, ll := run("round-robin"), run("least-loaded")
	if rr.TTFTP99 < 5000 {
		t.Fatalf("round-robin's p99 is %.0f ms: the gate's load is too light to tell policies apart", rr.TTFTP99)
	}
	for _, name := range []string{"kvselect", "kvselect-queue"} {
		if ok, why := qualityGate(run(name), rr, ll); !ok {
			t.Fatalf("%s fails the routing-quality gate: %s", name, why)
		}
	}
	// The gate must be able to fail: a cache-blind and a load-blind policy both fail it.
	if ok, _ := qualityGate(ll, rr, ll); ok {
		t.Fatal("the gate accepts least-loaded, a cache-blind policy")
	}
	if ok, _ := qualityGate(rr, rr, ll); ok {
		t.Fatal("the gate accepts round-robin, a cache-blind policy")
	}
	if ok, _ := qualityGate(run("prefix-hash"), rr, ll); ok {
		t.Fatal("the gate accepts prefix-hash, a load-blind policy")
	}
}

func TestSimulatorDeterministic(t *testing.T) {
	reqs, err := LoadTrace(tracePath(t, "mooncake_synthetic_trace.jsonl"), 300)
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range fleet.PresetNames() {
		cfg := Config{Workers: 4, CapacityBlocks: 500, Speedup: 2, Seed: 1, Model: model, KVEventDelayMS: 5}
		for _, p := range []string{"random", "sglang-like", "kvselect"} {
			a, err := RunPolicy(p, cfg, reqs)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := RunPolicy(p, cfg, reqs)
			if a != b {
				t.Fatalf("%s %s: two runs differ:\n%+v\n%+v", model, p, a, b)
			}
		}
	}
}

func TestIdealHitRate(t *testing.T) {
	reqs := []Request{
		{Input: 1024, Blocks: []uint64{1, 2}},
		{Input: 1536, Blocks: []uint64{1, 2, 3}}, // 2 of 3 blocks reusable: 1024 tokens
		{Input: 100, Blocks: []uint64{9}},
	}
	want := 1024.0 / (1024 + 1536 + 100)
	if got := IdealHitRate(reqs); got != want {
		t.Fatalf("IdealHitRate = %v, want %v", got, want)
	}
}

func TestIdealHitRateAt(t *testing.T) {
	blocks := func(ids ...uint64) Request { return Request{Input: len(ids) * TraceBlockTokens, Blocks: ids} }
	a, b, c := blocks(1, 2), blocks(3), blocks(4)
	cases := []struct {
		name     string
		reqs     []Request
		capacity int
		hitReqs  []int // indices of the requests whose whole prompt is reused
	}{
		// A, B, A (refreshes 1 and 2), then C evicts the least recently used block, 3: A hits
		// again and B misses.
		{"lru-order", []Request{a, b, a, c, a, b}, 3, []int{2, 4}},
		// With room for everything every repeat hits.
		{"no-eviction", []Request{a, b, a, c, b, a}, 4, []int{2, 4, 5}},
		// Two blocks of room: each new prompt evicts the previous one.
		{"thrash", []Request{a, blocks(5, 6), a}, 2, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hit, total float64
			for i, r := range tc.reqs {
				total += float64(r.Input)
				if slices.Contains(tc.hitReqs, i) {
					hit += float64(r.Input)
				}
			}
			if got := IdealHitRateAt(tc.reqs, tc.capacity); got != hit/total {
				t.Fatalf("IdealHitRateAt = %v, want %v", got, hit/total)
			}
		})
	}
	// An unbounded cache is IdealHitRate, and a cache bounds reuse from above.
	reqs := []Request{a, b, a, c, blocks(1, 2, 7), b}
	if got, want := IdealHitRateAt(reqs, 1<<20), IdealHitRate(reqs); got != want {
		t.Fatalf("unbounded: %v, want IdealHitRate %v", got, want)
	}
	if IdealHitRateAt(reqs, 2) > IdealHitRate(reqs) || IdealHitRateAt(reqs, 0) != 0 {
		t.Fatal("a bounded cache must not beat an infinite one, and no cache reuses nothing")
	}
}
