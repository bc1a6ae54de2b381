package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/integration/fleet"
)

// holders counts, while a run goes, the workers holding one block in their cache (as their KV
// events tell the engine) and the most that held it at once.
type holders struct {
	EventSink
	block uint64
	now   map[int]bool
	peak  int
}

func (h *holders) Stored(w int, parent uint64, hasParent bool, blocks []uint64) {
	h.EventSink.Stored(w, parent, hasParent, blocks)
	for _, b := range blocks {
		if b == h.block {
			h.now[w] = true
			h.peak = max(h.peak, len(h.now))
		}
	}
}

func (h *holders) Removed(w int, blocks []uint64) {
	h.EventSink.Removed(w, blocks)
	for _, b := range blocks {
		if b == h.block {
			delete(h.now, w)
		}
	}
}

// hottestFirstBlock is the first block shared by the most requests.
func hottestFirstBlock(reqs []Request) uint64 {
	n := map[uint64]int{}
	best := uint64(0)
	for _, r := range reqs {
		if len(r.Blocks) > 0 {
			b := r.Blocks[0]
			n[b]++
			if n[b] > n[best] || (n[b] == n[best] && b < best) {
				best = b
			}
		}
	}
	return best
}

// TestHotPrefixSpreads: a hot shared system prompt that one worker cannot serve alone is
// computed on several (legacy-model) workers under kvselect's default, and the engine's index shows every
// copy — the peak number of workers holding its first block, from the KV events the engine
// applied, and the index's own overlap rows at the end.
func TestHotPrefixSpreads(t *testing.T) {
	reqs, err := Synth("sysprompt?prompts=4&sys=16384&requests=1500&seed=7")
	if err != nil {
		t.Fatal(err)
	}
	hot := hottestFirstBlock(reqs)
	cfg := Config{Workers: 8, CapacityBlocks: 2000, Speedup: 4, Seed: 1, Model: fleet.PresetLegacy}
	run := func(ec engine.Config) (int, int, Result) {
		p, err := NewEnginePolicy("kvselect", ec, cfg.Workers, cfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		h := &holders{EventSink: p, block: hot, now: map[int]bool{}}
		res, err := Run(cfg, reqs, p, h)
		if err != nil {
			t.Fatal(err)
		}
		q := &engine.PromptQuery{}
		isl := uint64(TraceBlockTokens)
		q.BlockHashes, q.SequenceHashes, q.ISLTokens = []int64{int64(hot)}, []int64{int64(hot)}, &isl
		ov, err := p.Engine().OverlapScores(q)
		if err != nil {
			t.Fatal(err)
		}
		indexed := 0
		for _, row := range ov.Workers {
			if row.DeviceBlocks > 0 {
				indexed++
			}
		}
		if indexed != len(h.now) {
			t.Fatalf("the index lists %d holders of the hot prefix, the workers' events %d", indexed, len(h.now))
		}
		return h.peak, indexed, res
	}
	peak, indexed, res := run(KVSelectConfig())
	old := KVSelectConfig()
	old.AffinityWeight, old.MissWorkWeight, old.EvictionWeight, old.CacheStickShare = 30, 0, 0, 0
	oldPeak, _, oldRes := run(old)
	t.Logf("hot prefix held by up to %d workers (%d at the end), load CV %.2f, mean TTFT %.0f ms; affinity-30 cost: %d workers, CV %.2f, mean %.0f ms",
		peak, indexed, res.LoadCV, res.TTFTMean, oldPeak, oldRes.LoadCV, oldRes.TTFTMean)
	if peak < 3 {
		t.Errorf("the hot prefix reached only %d workers", peak)
	}
}

// TestNoCollapseUnderOverload: 48 agentic sessions with ~88K-token prompts on 8 legacy-model
// workers of 1,000 blocks at four times the shape's rate — the overload point where cost
// functions that trade reuse for balance thrash the caches (the affinity-30 cost reached 2–4× the
// best baseline's mean here, issue 13 saw 40× on a similar trace). The fleet's caches hold only
// about its sessions' contexts, so every session moved off its cache recomputes ~88K tokens and
// the run is chaotic: one seed says little. Over the shape's seeds 1–5 kvselect's default keeps
// most of the reuse on every one, its mean TTFT within 2× of the best baseline's on every one
// and within 1.25× in geometric mean (0.96×: 1.47, 0.58, 0.86, 0.90, 1.21× — SGLang's router,
// which never moves a session, the best baseline on each; seed 5 1.20× before the KV-occupancy
// term, README "KV occupancy priced for long requests"; 1.45× at seed 1 before live requests
// were priced, README "Live requests priced"; before cache stickiness 1.30, 0.62,
// 0.73, 0.83, 1.73×, README "Cache stickiness"; with β capped at 1, the default before that,
// 1.06, 1.99, 0.59, 1.27 and 3.34×, geometric mean 1.39×, would fail; README, "Valuing reuse
// under load").
func TestNoCollapseUnderOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("several full simulations")
	}
	logSum := 0.0
	const seeds = 5
	for seed := 1; seed <= seeds; seed++ {
		reqs, err := Synth(fmt.Sprintf("agentic?seed=%d", seed))
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Workers: 8, CapacityBlocks: 1000, Speedup: 4, Seed: 1, Model: fleet.PresetLegacy}
		kv, err := RunPolicy("kvselect", cfg, reqs)
		if err != nil {
			t.Fatal(err)
		}
		best := Result{TTFTMean: -1}
		for _, name := range []string{"least-loaded", "max-overlap", "sglang", "llm-d", "dynamo"} {
			r, err := RunPolicy(name, cfg, reqs)
			if err != nil {
				t.Fatal(err)
			}
			if best.TTFTMean < 0 || r.TTFTMean < best.TTFTMean {
				best = r
			}
		}
		ratio := kv.TTFTMean / best.TTFTMean
		logSum += math.Log(ratio)
		t.Logf("seed %d: kvselect hit %.1f%%, mean %.0f ms, p99 %.0f ms; best baseline %s: hit %.1f%%, mean %.0f ms, p99 %.0f ms (%.2f×)",
			seed, 100*kv.HitRate, kv.TTFTMean, kv.TTFTP99, best.Policy, 100*best.HitRate, best.TTFTMean, best.TTFTP99, ratio)
		if kv.HitRate < 0.8 || ratio > 2 {
			t.Errorf("seed %d: kvselect collapsed: hit %.1f%%, mean %.0f ms vs %s's %.0f ms", seed, 100*kv.HitRate, kv.TTFTMean, best.Policy, best.TTFTMean)
		}
	}
	if g := math.Exp(logSum / seeds); g > 1.25 {
		t.Errorf("geometric mean over seeds 1–%d: %.2f× the best baseline's mean TTFT, want ≤ 1.25×", seeds, g)
	}
}

// TestHotPrefixSpreadsOnTheEngineModel: the same on the 8B vLLM-style preset (batched chunked
// prefill, KV events 5 ms late), at the load of README's synth:sysprompt row: the hottest
// system prompt is held by several workers, and the load is far more even than under the
// affinity-30 cost.
func TestHotPrefixSpreadsOnTheEngineModel(t *testing.T) {
	reqs, err := Synth("sysprompt?requests=1500")
	if err != nil {
		t.Fatal(err)
	}
	hot := hottestFirstBlock(reqs)
	cfg := Config{Workers: 8, Speedup: 2, Seed: 42, Model: fleet.PresetH100_8B, KVEventDelayMS: 5}
	run := func(ec engine.Config) (int, Result) {
		p, err := NewEnginePolicy("kvselect", ec, cfg.Workers, cfg.Seed)
		if err != nil {
			t.Fatal(err)
		}
		h := &holders{EventSink: p, block: hot, now: map[int]bool{}}
		res, err := Run(cfg, reqs, p, h)
		if err != nil {
			t.Fatal(err)
		}
		return h.peak, res
	}
	peak, res := run(KVSelectConfig())
	old := KVSelectConfig()
	old.AffinityWeight, old.MissWorkWeight, old.EvictionWeight, old.CacheStickShare = 30, 0, 0, 0
	oldPeak, oldRes := run(old)
	t.Logf("hot prefix on up to %d workers, CV %.2f, mean %.0f ms; affinity-30: %d workers, CV %.2f, mean %.0f ms",
		peak, res.LoadCV, res.TTFTMean, oldPeak, oldRes.LoadCV, oldRes.TTFTMean)
	if peak < 3 || !(res.LoadCV < oldRes.LoadCV) {
		t.Errorf("hot prefix on %d workers, load CV %.2f (affinity-30: %.2f)", peak, res.LoadCV, oldRes.LoadCV)
	}
}
