package fleet

import "slices"

// Variant presets: fleets shaped differently from the ones the default was tuned on, so that
// robustness is measured on engines nobody tuned for. Reachable through Preset and listed by
// VariantPresets, not by Presets/PresetNames (the default matrix and its results files stay as
// they were).
//
//   - a100-8b: the vLLM-style engine on an A100 (a slower GPU, a quarter of the step budget,
//     a quarter of the running sequences).
//   - a100x8-70b: the vLLM-style 70B engine, TP8 over eight A100s (the 70B counterpart of
//     a100-8b, for mixed fleets of the larger model: fleet.Mix).
//   - h200-8b: the vLLM-style engine on an H200: the H100's compute with more and faster
//     memory, so about twice the KV cache (a fleet whose workers register different
//     total_kv_blocks: fleet.Mix).
//   - sglang-fcfs-h100-8b: the SGLang-style engine under its current default schedule policy,
//     first come first served, where the sglang-* presets order the waiting queue by longest
//     cached prefix (SGLangParams.LPM).
//
// The A100 (NVIDIA A100 SXM4 80 GB datasheet): 312 TFLOP/s dense BF16, 2.039 TB/s HBM2e,
// 80 GB. vLLM's batch defaults exclude the A100 from its large-GPU tier whatever its memory
// (vllm/engine/arg_utils.py, get_batch_defaults: "device_memory >= 70 GiB and 'a100' not in
// device_name"), so an A100 OpenAI API server runs with max_num_batched_tokens 2048 and
// max_num_seqs 256. The efficiencies are the H100 presets' (55 % of peak for GEMMs, 50 % for
// flash attention).
const (
	a100FLOPs = 312e12   // FLOP/s, dense BF16
	a100BW    = 2.039e12 // bytes/s, HBM2e
	a100Mem   = 80e9     // bytes

	// PresetA100_8B names a100Llama8B, PresetA100x8_70B a100x8Llama70B, PresetH200_8B
	// h200Llama8B, PresetSGLangFCFS_8B sglangFCFSH100Llama8B.
	PresetA100_8B       = "a100-8b"
	PresetA100x8_70B    = "a100x8-70b"
	PresetH200_8B       = "h200-8b"
	PresetSGLangFCFS_8B = "sglang-fcfs-h100-8b"
)

// The H200 (NVIDIA H200 SXM datasheet): the H100 SXM's 989 TFLOP/s dense BF16, 4.8 TB/s HBM3e,
// 141 GB; vLLM gives it the large-GPU batch defaults (8192, 1024).
const (
	h200BW  = 4.8e12 // bytes/s, HBM3e
	h200Mem = 141e9  // bytes
)

var variantPresets = []Spec{a100Llama8B(), sglangFCFSH100Llama8B(), a100x8Llama70B(), h200Llama8B()}

// a100Llama8B is an 8B Llama-3-class model in BF16 on one A100 SXM4 80 GB:
//
//   - Fixed = 9.1 ms: 16.1 GB of weights read once per step at 2.039 TB/s (7.9 ms) plus the
//     H100 preset's ~1.2 ms of per-step overhead.
//   - PerToken = 2 × 8.03e9 FLOP / (312e12 × 0.55) = 0.0936 ms (≈ 10.7 K prefill tokens/s).
//   - PerAttnPair = 4 × 32 × 4096 FLOP / (312e12 × 0.5) = 3.36e-6 ms.
//   - PerKVToken = 131072 B / 2.039e12 B/s = 6.4e-5 ms.
//   - PerDecode = 0.01 ms.
//   - KVTokens: the H100 preset's (same memory, weights and activations): ≈ 396 K tokens.
//   - MaxNumBatchedTokens 2048, MaxNumSeqs 256: vLLM's defaults on an A100 (above).
//
// It repeats h100Llama8B's formulas with the A100's constants on purpose: written as one helper
// over GPU parameters, they are evaluated in float64 at run time instead of exactly at compile
// time, and the H100 preset's PerToken and PerAttnPair change in their last bit (measured),
// which would move every committed H100 result.
func a100Llama8B() Spec {
	kvBytes := 2.0 * 32 * 8 * 128 * 2
	return Spec{
		Name: PresetA100_8B, MaxNumBatchedTokens: 2048, MaxNumSeqs: 256,
		KVTokens: int((0.9*a100Mem - 2*llama8BParams - 4e9) / kvBytes),
		Step: StepModel{
			Fixed:       2*llama8BParams/a100BW*1e3 + 1.2,
			PerToken:    2 * llama8BParams / (a100FLOPs * 0.55) * 1e3,
			PerAttnPair: 4 * 32 * 4096 / (a100FLOPs * 0.5) * 1e3,
			PerKVToken:  kvBytes / a100BW * 1e3,
			PerDecode:   0.01,
		},
		About: "Llama-3-8B-class, BF16, one A100 SXM4 80 GB (vLLM's A100 defaults: 2048 batched tokens, 256 seqs)",
	}
}

// a100x8Llama70B is a 70B Llama-3-class model in BF16, tensor-parallel over eight A100 SXM4 80 GB,
// h100x8Llama70B's formulas with the A100's constants:
//
//   - Fixed = 13.1 ms: 141 GB of weights / 8 GPUs read at 2.039 TB/s (8.7 ms), two all-reduces
//     per layer × 80 layers at ~20 µs each over NVLink 3 (3.2 ms; an estimate, the H100
//     preset's 15 µs scaled towards NVLink 3's 600 GB/s against NVLink 4's 900 GB/s, small
//     all-reduces being mostly latency), ~1.2 ms overhead.
//   - PerToken = 2 × 70.6e9 FLOP / (8 × 312e12 × 0.45) = 0.126 ms (≈ 8 K prefill tokens/s).
//   - PerAttnPair = 4 × 80 × 8192 FLOP / (8 × 312e12 × 0.5) = 2.1e-6 ms.
//   - PerKVToken = 327680 B / (8 × 2.039e12 B/s) = 2.0e-5 ms.
//   - PerDecode = 0.01 ms.
//   - KVTokens: the H100 preset's (same memory per GPU): ≈ 1.23 M tokens (2400 blocks).
//   - MaxNumBatchedTokens 2048, MaxNumSeqs 256: vLLM's A100 defaults (above).
//
// A lone 8K-token prefill takes 1.15 s (the H100 preset's 356 ms), a decode step at 4K
// context 13.3 ms (8.97 ms). It repeats h100x8Llama70B's formulas with the A100's constants for
// the reason a100Llama8B gives: one helper over GPU parameters would move the H100 results.
func a100x8Llama70B() Spec {
	kvBytes := 2.0 * 80 * 8 * 128 * 2
	return Spec{
		Name: PresetA100x8_70B, MaxNumBatchedTokens: 2048, MaxNumSeqs: 256,
		KVTokens: int((8*(0.9*a100Mem-4e9) - 2*llama70BParams) / kvBytes),
		Step: StepModel{
			Fixed:       2*llama70BParams/8/a100BW*1e3 + 2*80*0.020 + 1.2,
			PerToken:    2 * llama70BParams / (8 * a100FLOPs * 0.45) * 1e3,
			PerAttnPair: 4 * 80 * 8192 / (8 * a100FLOPs * 0.5) * 1e3,
			PerKVToken:  kvBytes / (8 * a100BW) * 1e3,
			PerDecode:   0.01,
		},
		About: "Llama-3-70B-class, BF16, TP8 over eight A100 SXM4 80 GB (vLLM's A100 defaults: 2048 batched tokens, 256 seqs)",
	}
}

// h200Llama8B is an 8B Llama-3-class model in BF16 on one H200 SXM: h100Llama8B with the
// H200's memory size and bandwidth (only the terms those enter are rewritten, so the H100's
// compute terms are the H100 preset's bit for bit):
//
//   - Fixed = 4.5 ms: 16.1 GB of weights read once per step at 4.8 TB/s (3.3 ms) plus ~1.2 ms.
//   - PerToken, PerAttnPair: the H100's (the same compute): 0.0295 ms, 1.06e-6 ms.
//   - PerKVToken = 131072 B / 4.8e12 B/s = 2.7e-5 ms.
//   - PerDecode = 0.01 ms.
//   - KVTokens: 0.9 × 141 GB − 16.1 GB of weights − ~4 GB = 106.8 GB at 131072 B per token
//     ≈ 815 K tokens (1,592 blocks of 512 tokens, about twice the H100's 773).
func h200Llama8B() Spec {
	s := h100Llama8B() // the H100's compute: PerToken, PerAttnPair, PerDecode and batch limits
	kvBytes := 2.0 * 32 * 8 * 128 * 2
	s.Name = PresetH200_8B
	s.KVTokens = int((0.9*h200Mem - 2*llama8BParams - 4e9) / kvBytes)
	s.Step.Fixed = 2*llama8BParams/h200BW*1e3 + 1.2
	s.Step.PerKVToken = kvBytes / h200BW * 1e3
	s.About = "Llama-3-8B-class, BF16, one H200 SXM (the H100's compute, 141 GB at 4.8 TB/s; vLLM defaults: 8192 batched tokens, 1024 seqs)"
	return s
}

// sglangFCFSH100Llama8B is sglangH100Llama8B with SGLang's default schedule policy, "fcfs"
// (server_args since 2025): the waiting queue in arrival order, so a request that hits the
// cache no longer overtakes the misses queued before it.
func sglangFCFSH100Llama8B() Spec {
	s := sglangH100Llama8B()
	p := *s.SGLang
	p.LPM = false
	s.Name, s.SGLang = PresetSGLangFCFS_8B, &p
	s.About = "SGLang-style engine with SGLang's default FCFS schedule policy (radix cache, prefill-first, retraction): Llama-3-8B-class, BF16, one H100 SXM"
	return s
}

// VariantPresets returns the variant presets (above).
func VariantPresets() []Spec { return slices.Clone(variantPresets) }
