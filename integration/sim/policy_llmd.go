package sim

import "math/rand/v2"

// llm-d's default scheduling profile for precise prefix-cache-aware routing
// (llm-d/llm-d-inference-scheduler deploy/config/epp-precise-prefix-cache-config.yaml, and the
// llm-d guide guides/precise-prefix-cache-aware/scheduler/precise-prefix-cache-aware.values.yaml):
// precise-prefix-cache-scorer weight 2, kv-cache-utilization-scorer weight 1, queue-scorer
// weight 1, max-score-picker.
const (
	LLMDPrefixWeight = 2.0
	LLMDKVUtilWeight = 1.0
	LLMDQueueWeight  = 1.0
)

// llmd is llm-d's inference scheduler (endpoint picker) with its default precise
// prefix-cache-aware profile. Each worker's score is the weighted sum of three scorers, each in
// [0, 1]:
//
//   - precise-prefix-cache-scorer (llm-d/llm-d-inference-scheduler
//     pkg/plugins/scorer/precise_prefix_cache.go, scores from llm-d-kv-cache's index): the
//     number of leading prompt blocks the worker holds according to the KV events it published,
//     for the workers that hold at least one; min–max normalised over those workers
//     (pkg/plugins/scorer/utils.go: (s − min)/(max − min), 1 when they are all equal), 0 for
//     the others. Speculative indexing (entries added at routing time) is off by default and
//     is off here: only confirmed KV events count.
//   - queue-scorer (kubernetes-sigs/gateway-api-inference-extension,
//     pkg/epp/scheduling/framework/plugins/scorer/queue.go): from the scraped
//     vllm:num_requests_waiting, (max − q)/(max − min) over the candidates, 1 for all when they
//     are equal.
//   - kv-cache-utilization-scorer (same repository, scorer/kvcache_utilization.go): 1 − the
//     scraped vllm:kv_cache_usage_perc.
//
// The max-score-picker (gateway-api-inference-extension
// pkg/epp/scheduling/framework/plugins/picker/max_score_picker.go) shuffles the candidates and
// keeps the first with the highest score: ties go to a random one (seeded here).
//
// It sees KV events (kvEventIndex; pass it to Run as the EventSink) and the scraped metrics of
// view_observed.go, nothing else. It keeps no load of its own: the EPP's load signals are the
// scraped gauges.
type llmd struct {
	kvEventIndex
	rng     *rand.Rand
	matched []int
	waiting []int
	usage   []float64
	scores  []float64
	perm    []int
}

// NewLLMD returns llm-d's default precise prefix-cache-aware scheduler.
func NewLLMD(seed uint64) Policy { return &llmd{rng: rand.New(rand.NewPCG(seed, 17))} }

func (p *llmd) Name() string { return "llm-d" }

func (p *llmd) Pick(v *View, _ int, r *Request) int {
	n := v.Workers()
	p.matched, p.waiting, p.usage = p.matched[:0], p.waiting[:0], p.usage[:0]
	for w := range n {
		p.matched = append(p.matched, p.Prefix(w, r.Blocks))
		p.waiting = append(p.waiting, v.WaitingRequests(w))
		p.usage = append(p.usage, v.KVCacheUsage(w))
	}
	p.scores = llmdScores(p.matched, p.waiting, p.usage, p.scores[:0])
	return p.pickMax(p.scores)
}

// llmdScores appends to out the weighted score of each worker given its matched prefix blocks,
// waiting requests and KV-cache usage.
func llmdScores(matched, waiting []int, usage []float64, out []float64) []float64 {
	loM, hiM := -1, -1 // over workers with a match only
	loQ, hiQ := waiting[0], waiting[0]
	for w := range matched {
		if m := matched[w]; m > 0 {
			if loM < 0 || m < loM {
				loM = m
			}
			hiM = max(hiM, m)
		}
		loQ, hiQ = min(loQ, waiting[w]), max(hiQ, waiting[w])
	}
	for w := range matched {
		prefix := 0.0
		if m := matched[w]; m > 0 {
			prefix = 1
			if hiM > loM {
				prefix = float64(m-loM) / float64(hiM-loM)
			}
		}
		queue := 1.0
		if hiQ > loQ {
			queue = float64(hiQ-waiting[w]) / float64(hiQ-loQ)
		}
		kv := 1 - usage[w]
		out = append(out, LLMDPrefixWeight*prefix+LLMDKVUtilWeight*kv+LLMDQueueWeight*queue)
	}
	return out
}

// pickMax is the max-score-picker: the first highest score in a random order.
func (p *llmd) pickMax(scores []float64) int {
	p.perm = p.perm[:0]
	for w := range scores {
		p.perm = append(p.perm, w)
	}
	p.rng.Shuffle(len(p.perm), func(i, j int) { p.perm[i], p.perm[j] = p.perm[j], p.perm[i] })
	best := p.perm[0]
	for _, w := range p.perm[1:] {
		if scores[w] > scores[best] {
			best = w
		}
	}
	return best
}

func (p *llmd) PrefillDone(int) {}
func (p *llmd) Done(int)        {}
