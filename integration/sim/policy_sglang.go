package sim

import (
	"math"
	"math/rand/v2"
)

// SGLangConfig holds the knobs of SGLang's cache-aware router. DefaultSGLangConfig has the
// router's defaults.
type SGLangConfig struct {
	// CacheThreshold: route to the best-matching worker only when the matched share of the
	// prompt is above it; otherwise to the worker with the smallest tree.
	CacheThreshold float64
	// BalanceAbsThreshold and BalanceRelThreshold: the fleet is imbalanced, and the request goes
	// to the worker with the fewest in-flight requests, when max − min > abs and max > rel·min.
	BalanceAbsThreshold int
	BalanceRelThreshold float64
	// EvictionIntervalMS is how often (simulated time) the trees are trimmed; 0 disables it.
	EvictionIntervalMS float64
	// MaxTreeTokens is the size each worker's share of the tree is trimmed to.
	MaxTreeTokens int
}

// SGLangCharsPerToken converts the router's max_tree_size, counted in characters of request
// text, to the tokens the simulator's tree counts: about four characters per token for
// English text under BPE tokenizers (OpenAI's rule of thumb).
const SGLangCharsPerToken = 4

// DefaultSGLangConfig is the router's default configuration: cache_threshold 0.3,
// balance_abs_threshold 64, balance_rel_threshold 1.5, eviction_interval 120 s, max_tree_size
// 2^26 characters (sgl-project/sglang sgl-router/py_src/sglang_router/router_args.py,
// RouterArgs; the Rust CLI and sgl-model-gateway use the same values). The router's rate
// limiter (max_concurrent_requests) is not part of the policy and is not modelled.
func DefaultSGLangConfig() SGLangConfig {
	return SGLangConfig{
		CacheThreshold:      0.3,
		BalanceAbsThreshold: 64,
		BalanceRelThreshold: 1.5,
		EvictionIntervalMS:  120_000,
		MaxTreeTokens:       67_108_864 / SGLangCharsPerToken,
	}
}

// sglang is SGLang's cache-aware router as sgl-router implements it (sgl-project/sglang,
// sgl-router/src/policies/cache_aware.rs and src/tree.rs; carried on as sgl-model-gateway's
// cache_aware policy):
//
//  1. Load is the router's own count of in-flight requests per worker (incremented when it
//     routes a request, decremented when the response ends). When max − min >
//     balance_abs_threshold and max > balance_rel_threshold·min the fleet is imbalanced: the
//     request goes to the least-loaded worker (the first one on ties).
//  2. Otherwise the approximate tree (approxTree) gives the longest prefix of the prompt sent
//     to any worker and one worker holding it. When matched tokens ÷ prompt tokens exceeds
//     cache_threshold the request goes there, otherwise to the worker with the smallest tree
//     (the most cache room, as the router reasons).
//  3. Either way the chosen worker's tree gets the whole prompt at routing time — not when
//     the worker has computed it — which is why it follows a conversation from its next turn
//     even if that turn arrives before the last one has finished prefilling.
//  4. Every eviction interval each worker's share of the tree is trimmed to max_tree_size,
//     least recently used leaves first. At the defaults the tree far outgrows any worker's KV
//     cache: it keeps believing prefixes that the worker evicted long ago are cached.
//
// It sees no KV events and no worker metrics. The tie order of the tree (tree.rs iterates a
// hash map) is a seeded permutation of the workers.
type sglang struct {
	cfg       SGLangConfig
	tree      *approxTree
	load      loadTracker
	seed      uint64
	nextEvict float64
}

// NewSGLang returns SGLang's cache-aware router with its default configuration.
func NewSGLang(seed uint64) Policy { return NewSGLangWith(DefaultSGLangConfig(), seed) }

// NewSGLangWith returns SGLang's cache-aware router with cfg.
func NewSGLangWith(cfg SGLangConfig, seed uint64) Policy {
	return &sglang{cfg: cfg, seed: seed, nextEvict: cfg.EvictionIntervalMS}
}

func (p *sglang) Name() string { return "sglang" }

func (p *sglang) Pick(v *View, id int, r *Request) int {
	n := v.Workers()
	if p.tree == nil {
		p.tree = newApproxTree(n, rand.New(rand.NewPCG(p.seed, 13)).Perm(n))
	}
	now := v.Now()
	if iv := p.cfg.EvictionIntervalMS; iv > 0 && now >= p.nextEvict {
		// The router's eviction thread wakes every interval; nothing was inserted since the
		// last request, so one trim stands for every wake-up in between.
		p.tree.evict(p.cfg.MaxTreeTokens)
		p.nextEvict += iv * (math.Floor((now-p.nextEvict)/iv) + 1)
	}
	w := p.choose(n, r, now)
	p.tree.insert(r.Blocks, r.Input, w, now)
	p.load.route(id, w, r.Input)
	return w
}

// choose applies the imbalance rule, then the cache rule.
func (p *sglang) choose(n int, r *Request, now float64) int {
	lo, hi, loW := p.load.InFlight(0), p.load.InFlight(0), 0
	for w := 1; w < n; w++ {
		l := p.load.InFlight(w)
		if l < lo {
			lo, loW = l, w
		}
		hi = max(hi, l)
	}
	if hi-lo > p.cfg.BalanceAbsThreshold && float64(hi) > float64(lo)*p.cfg.BalanceRelThreshold {
		return loW
	}
	matched, tenant := p.tree.prefixMatch(r.Blocks, now)
	if tenant >= 0 && r.Input > 0 {
		tokens := min(matched*TraceBlockTokens, r.Input)
		if float64(tokens)/float64(r.Input) > p.cfg.CacheThreshold {
			return tenant
		}
	}
	return p.tree.smallestTenant()
}

func (p *sglang) PrefillDone(id int) { p.load.prefillDone(id) }
func (p *sglang) Done(id int)        { p.load.done(id) }
