package fleet

import (
	"fmt"
	"slices"
)

// StepModel is the duration of one engine step, in milliseconds:
//
//	step_ms = Fixed + PerToken·T + PerAttnPair·P + PerKVToken·C + PerDecode·D
//
// with T the tokens scheduled in the step (prefill chunks and decodes), P the prefill
// attention pairs (a chunk of n tokens after k computed ones has n·k + n(n+1)/2 query-context
// pairs), C the summed context length of the step's decoding requests, and D their number.
// The terms add what a roofline would overlap (compute-bound GEMMs and memory-bound weight and
// KV reads), which errs slightly slow for mixed steps; the order of magnitude and the shape
// (prefill cost linear in new tokens plus quadratic attention, decode cost growing with batch
// and context) are what routing depends on.
type StepModel struct {
	Fixed       float64
	PerToken    float64
	PerAttnPair float64
	PerKVToken  float64
	PerDecode   float64
}

// StepMS is the duration of a step with tokens scheduled tokens, attnPairs prefill attention
// pairs, kvTokens decode context tokens and decodes decoding requests.
func (m StepModel) StepMS(tokens int, attnPairs float64, kvTokens, decodes int) float64 {
	return m.Fixed + m.PerToken*float64(tokens) + m.PerAttnPair*attnPairs + m.PerKVToken*float64(kvTokens) + m.PerDecode*float64(decodes)
}

// PrefillMS is the time a lone prefill of n uncached tokens after cached takes on an idle
// engine with budget tokens per step (the sum of its chunked steps).
func (m StepModel) PrefillMS(cached, n, budget int) float64 {
	total := 0.0
	for n > 0 {
		c := min(n, max(1, budget))
		total += m.StepMS(c, attnPairs(cached, c), 0, 0)
		cached += c
		n -= c
	}
	return total
}

// DecodeStepMS is the time of one decode step of a lone request with context tokens.
func (m StepModel) DecodeStepMS(context int) float64 { return m.StepMS(1, 0, context, 1) }

// attnPairs is the number of (query, context) pairs of a chunk of n tokens after k computed.
func attnPairs(k, n int) float64 { return float64(n)*float64(k) + float64(n)*float64(n+1)/2 }

// Spec is one engine preset: the model, the hardware's KV capacity and vLLM's scheduler
// limits, as a worker would register them.
type Spec struct {
	Name string
	// Legacy selects the legacy engine (Step, MaxNumSeqs are then unused).
	Legacy bool
	// SGLang, when set, selects the SGLang-style engine (NewSGLang) with these parameters
	// (Step is then unused; MaxNumBatchedTokens and MaxNumSeqs mirror its chunked prefill size
	// and max running requests, as a worker would register them).
	SGLang *SGLangParams
	// KVTokens is the KV cache capacity in tokens; NumBlocks(bs) converts it to blocks.
	KVTokens            int
	MaxNumBatchedTokens int
	MaxNumSeqs          int
	Step                StepModel
	// About is a one-line description for --help.
	About string
}

// NumBlocks is the spec's KV capacity in blocks of bs tokens.
func (s Spec) NumBlocks(bs int) int { return max(1, s.KVTokens/max(1, bs)) }

// Preset names.
const (
	PresetLegacy   = "legacy"
	PresetH100_8B  = "h100-8b"
	PresetH100x870 = "h100x8-70b"
	// DefaultPreset is the realistic preset used when none is named.
	DefaultPreset = PresetH100_8B
)

// Public numbers the presets derive from.
//
//   - NVIDIA H100 SXM5 datasheet: 989 TFLOP/s dense BF16, 3.35 TB/s HBM3, 80 GB.
//   - Llama 3 8B (meta-llama/Meta-Llama-3-8B config.json): 8.03 B parameters, 32 layers,
//     hidden 4096, 8 KV heads of 128 dims. Llama 3 70B: 70.6 B, 80 layers, hidden 8192,
//     8 KV heads of 128 dims. BF16 weights and KV: 2 bytes per value.
//   - vLLM's defaults for GPUs with ≥ 70 GiB (vllm/engine/arg_utils.py, get_batch_defaults,
//     OpenAI API server): max_num_batched_tokens 8192, max_num_seqs 1024;
//     gpu_memory_utilization 0.9.
//   - FLOPs per token ≈ 2 × parameters (one multiply-add per weight); prefill attention
//     4 × layers × hidden FLOPs per query-context pair (QKᵀ and PV); decode attention reads
//     2 × layers × kv_heads × head_dim × 2 bytes of KV per context token.
//   - Efficiencies are assumptions in line with published vLLM measurements: ~55 % of peak for
//     single-GPU GEMMs (prefill throughput ≈ 30 K tokens/s for an 8B model on one H100, the
//     range vLLM's and NVIDIA's published prefill benchmarks report), 45 % under TP8, 50 % for
//     flash attention.
const (
	h100FLOPs = 989e12  // FLOP/s, dense BF16
	h100BW    = 3.35e12 // bytes/s, HBM3
	h100Mem   = 80e9    // bytes

	llama8BParams  = 8.03e9
	llama70BParams = 70.6e9
)

var presets = []Spec{
	{
		Name: PresetLegacy, Legacy: true, KVTokens: 4000 * 512, MaxNumBatchedTokens: 8192, MaxNumSeqs: 1024,
		About: "the old simulator: one FIFO prefill per worker timed by the Dynamo mocker polynomial, decode never delays prefill",
	},
	h100Llama8B(),
	h100x8Llama70B(),
}

// h100Llama8B is an 8B Llama-3-class model in BF16 on one H100 SXM:
//
//   - Fixed = 6.0 ms: the 16.1 GB of weights read once per step at 3.35 TB/s (4.8 ms) plus
//     ~1.2 ms of per-step scheduling, sampling and launch overhead.
//   - PerToken = 2 × 8.03e9 FLOP / (989e12 × 0.55) = 0.0295 ms (≈ 34 K prefill tokens/s).
//   - PerAttnPair = 4 × 32 × 4096 FLOP / (989e12 × 0.5) = 1.06e-6 ms.
//   - PerKVToken = 2 × 32 × 8 × 128 × 2 B = 131072 B / 3.35e12 B/s = 3.9e-5 ms.
//   - PerDecode = 0.01 ms per decoding request (logits and sampling, an estimate).
//   - KVTokens: 0.9 × 80 GB − 16.1 GB of weights − ~4 GB of activations and CUDA graphs
//     = 51.9 GB at 131072 B per token ≈ 396 K tokens (773 blocks of 512 tokens).
func h100Llama8B() Spec {
	kvBytes := 2.0 * 32 * 8 * 128 * 2
	return Spec{
		Name: PresetH100_8B, MaxNumBatchedTokens: 8192, MaxNumSeqs: 1024,
		KVTokens: int((0.9*h100Mem - 2*llama8BParams - 4e9) / kvBytes),
		Step: StepModel{
			Fixed:       2*llama8BParams/h100BW*1e3 + 1.2,
			PerToken:    2 * llama8BParams / (h100FLOPs * 0.55) * 1e3,
			PerAttnPair: 4 * 32 * 4096 / (h100FLOPs * 0.5) * 1e3,
			PerKVToken:  kvBytes / h100BW * 1e3,
			PerDecode:   0.01,
		},
		About: "Llama-3-8B-class, BF16, one H100 SXM (vLLM defaults: 8192 batched tokens, 1024 seqs)",
	}
}

// h100x8Llama70B is a 70B Llama-3-class model in BF16, tensor-parallel over eight H100 SXM:
//
//   - Fixed = 8.9 ms: 141 GB of weights / 8 GPUs read at 3.35 TB/s (5.3 ms), two all-reduces
//     per layer × 80 layers at ~15 µs each over NVLink (2.4 ms), ~1.2 ms overhead.
//   - PerToken = 2 × 70.6e9 FLOP / (8 × 989e12 × 0.45) = 0.0397 ms (≈ 25 K prefill tokens/s).
//   - PerAttnPair = 4 × 80 × 8192 FLOP / (8 × 989e12 × 0.5) = 6.6e-7 ms.
//   - PerKVToken = 2 × 80 × 8 × 128 × 2 B = 327680 B / (8 × 3.35e12 B/s) = 1.22e-5 ms.
//   - PerDecode = 0.01 ms.
//   - KVTokens: 8 × (0.9 × 80 GB − 4 GB) − 141 GB = 403 GB at 327680 B per token ≈ 1.23 M
//     tokens (2400 blocks of 512 tokens).
func h100x8Llama70B() Spec {
	kvBytes := 2.0 * 80 * 8 * 128 * 2
	return Spec{
		Name: PresetH100x870, MaxNumBatchedTokens: 8192, MaxNumSeqs: 1024,
		KVTokens: int((8*(0.9*h100Mem-4e9) - 2*llama70BParams) / kvBytes),
		Step: StepModel{
			Fixed:       2*llama70BParams/8/h100BW*1e3 + 2*80*0.015 + 1.2,
			PerToken:    2 * llama70BParams / (8 * h100FLOPs * 0.45) * 1e3,
			PerAttnPair: 4 * 80 * 8192 / (8 * h100FLOPs * 0.5) * 1e3,
			PerKVToken:  kvBytes / (8 * h100BW) * 1e3,
			PerDecode:   0.01,
		},
		About: "Llama-3-70B-class, BF16, TP8 over eight H100 SXM (vLLM defaults: 8192 batched tokens, 1024 seqs)",
	}
}

// Presets returns every preset, legacy first.
func Presets() []Spec { return slices.Clone(presets) }

// PresetNames returns the preset names, legacy first.
func PresetNames() []string {
	out := make([]string, len(presets))
	for i, p := range presets {
		out[i] = p.Name
	}
	return out
}

// AllPresetNames returns every preset name Preset accepts: PresetNames, then the
// independent (SGLang-style) presets, then the variant ones (variant_presets.go).
func AllPresetNames() []string {
	out := PresetNames()
	for _, p := range slices.Concat(sglangPresets, variantPresets) {
		out = append(out, p.Name)
	}
	return out
}

// Preset returns the named preset ("" is DefaultPreset).
func Preset(name string) (Spec, error) {
	if name == "" {
		name = DefaultPreset
	}
	for _, p := range presets {
		if p.Name == name {
			return p, nil
		}
	}
	for _, p := range slices.Concat(sglangPresets, variantPresets) {
		if p.Name == name {
			return p, nil
		}
	}
	return Spec{}, fmt.Errorf("fleet: unknown model preset %q (known: %v)", name, AllPresetNames())
}

// LegacyPrefillMS is the Dynamo mocker's prefill polynomial for t uncached tokens.
func LegacyPrefillMS(t int) float64 {
	x := float64(t)
	return 4.209989e-07*x*x + 1.518344e-02*x + 16.50142
}

// LegacyITLMS is the Dynamo mocker's decode step time at cache utilisation u ∈ [0, 1].
func LegacyITLMS(u float64) float64 {
	return max(1, -25.74*u*u+54.01*u+5.74)
}
