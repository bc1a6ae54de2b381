package sim

import (
	"slices"
	"testing"
)

// TestRouterQueueAgingOrder: one worker busy with a long prefill; three requests park. wspt
// serves the least uncached work first whatever its arrival; aging serves request 1 first
// because it arrived long enough before the shorter ones that its deadline (arrival + its own
// estimated prefill) comes first, then the shorter of the two that arrived together.
func TestRouterQueueAgingOrder(t *testing.T) {
	reqs := []Request{
		uncachedRequest(0, 1, 64), // ~1 s of prefill at the prior: the others arrive while it runs
		uncachedRequest(1, 2, 6),  // prior estimate ~67 ms → due at ~68 ms
		uncachedRequest(50, 3, 2), // ~33 ms → due at ~83 ms
		uncachedRequest(51, 4, 4), // ~49 ms → due at ~100 ms
	}
	for _, tc := range []struct {
		order string
		want  []int
	}{
		{"wspt", []int{2, 3, 1}},
		{"aging", []int{1, 2, 3}},
	} {
		t.Run(tc.order, func(t *testing.T) {
			p := queuedPolicy(t, tc.order, 0, 1)
			res, err := Run(Config{Workers: 1, CapacityBlocks: 200}, reqs, p, p)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.order, tc.want) || res.Rejected != 0 || res.Queued != 3 {
				t.Fatalf("dispatch order %v (queued %d, rejected %d), want %v", p.order, res.Queued, res.Rejected, tc.want)
			}
		})
	}
}

// TestKVSelectAgingBurst: under the saturating burst of TestRouterQueueBurst (400 requests in
// 0.4 s, so every policy's p99 is the burst's drain time), the aging order still lowers the
// mean against immediate dispatch without lengthening the tail, admits everything, and runs are
// deterministic. Its bound on overtaking is TestRouterQueueAgingBoundsWait's (core/engine).
func TestKVSelectAgingBurst(t *testing.T) {
	var reqs []Request
	for i := range 400 {
		blocks := 1 + (i*7)%14 // 512 to 7,168 tokens
		reqs = append(reqs, uncachedRequest(float64(i), uint64(i+1), blocks))
	}
	cfg := Config{Workers: 4, CapacityBlocks: 10000, Seed: 1}
	run := func(name string) Result {
		r, err := RunPolicy(name, cfg, reqs)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rejected != 0 {
			t.Fatalf("%s rejected %d", name, r.Rejected)
		}
		return r
	}
	direct, wspt, aging := run("kvselect"), run("kvselect-queue"), run("kvselect-aging")
	t.Logf("mean/p99 ms: direct %.0f/%.0f wspt %.0f/%.0f aging %.0f/%.0f", direct.TTFTMean, direct.TTFTP99, wspt.TTFTMean, wspt.TTFTP99, aging.TTFTMean, aging.TTFTP99)
	if again := run("kvselect-aging"); again != aging {
		t.Fatalf("kvselect-aging is not deterministic: %+v vs %+v", again, aging)
	}
	if !(aging.TTFTMean < direct.TTFTMean) {
		t.Fatalf("aging mean %.0f not below immediate dispatch's %.0f", aging.TTFTMean, direct.TTFTMean)
	}
	if aging.TTFTP99 > 1.02*direct.TTFTP99 {
		t.Fatalf("aging p99 %.0f above immediate dispatch's %.0f", aging.TTFTP99, direct.TTFTP99)
	}
	if !(aging.TTFTMean > wspt.TTFTMean) {
		t.Fatalf("aging mean %.0f not above wspt's %.0f: the order is not aging anything", aging.TTFTMean, wspt.TTFTMean)
	}
}
