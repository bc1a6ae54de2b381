package fleet

import "slices"

// SGLangParams are the scheduler limits and the step-time model of the SGLang-style engine
// (NewSGLang). The defaults the presets use are SGLang's (python/sglang/srt/server_args.py,
// global_config.py, managers/schedule_policy.py), cited field by field.
type SGLangParams struct {
	// ChunkedPrefillSize caps the new tokens of one prefill batch (server_args
	// chunked_prefill_size: 8192 on GPUs with 35–160 GB, H100 among them). A prompt longer
	// than what is left of it is split; at most one request is mid-chunk at a time.
	ChunkedPrefillSize int
	// MaxPrefillTokens is the prefill batch's input budget (server_args max_prefill_tokens,
	// 16384): a request whose new tokens reach what is left stops admission unless the batch
	// is empty.
	MaxPrefillTokens int
	// MaxRunningRequests bounds the running batch (the scheduler's max_running_requests,
	// by default the request pool size, which model_runner derives as
	// min(max(KV tokens / context_len × 512, 2048), 4096): 4096 for both presets).
	MaxRunningRequests int
	// LPM orders the waiting queue by longest cached prefix (schedule_policy "lpm") while it
	// holds at most LPMQueueLimit requests (128, _determine_active_policy), first-come
	// first-served beyond. false is "fcfs" (the default of SGLang releases since 2025; "lpm"
	// was the default before, and is the cache-aware choice these presets model).
	LPM           bool
	LPMQueueLimit int
	// InitNewTokenRatio, MinNewTokenRatio and NewTokenRatioDecaySteps drive the estimate of how
	// much of its remaining max_new_tokens a running request will still write, which admission
	// reserves (global_config: init 0.7 × schedule_conservativeness 1.0, min = init × 0.14,
	// decaying linearly from init to min over 600 decode steps).
	InitNewTokenRatio       float64
	MinNewTokenRatio        float64
	NewTokenRatioDecaySteps int
	// RetractDecodeSteps: when a decode step lacks KV space, requests are retracted until the
	// rest has room for this many decode steps each (global_config retract_decode_steps, 20).
	RetractDecodeSteps int
	// ClipMaxNewTokens clips a request's max_new_tokens in admission's reservation
	// (schedule_policy CLIP_MAX_NEW_TOKENS, 4096).
	ClipMaxNewTokens int
	// CUDAGraphMaxBS is the largest decode batch replayed from a captured CUDA graph
	// (server_args cuda_graph_max_bs on H100: 256 below TP4, 512 from TP4); larger decode
	// batches run eagerly and pay Roofline.EagerLaunch instead of GraphLaunch.
	CUDAGraphMaxBS int
	Cost           Roofline
}

// Roofline is the SGLang-style engine's step time, in milliseconds. Unlike StepModel (which
// adds every term) it takes the larger of the memory-bound and compute-bound costs, as a
// roofline does, and prices prefill and decode batches separately because SGLang never mixes
// them by default (enable_mixed_chunk is off):
//
//	prefill_ms = PrefillOverhead + max(WeightsMS, FLOPTokenMS·T) + CommTokenMS·T + AttnPairMS·P
//	decode_ms  = launch(D) + CommLatencyMS + max(WeightsMS + KVTokenMS·C, FLOPTokenMS·D) + SampleMS·D
//
// with T the batch's new tokens, P its attention pairs (a chunk of n tokens after k cached
// has n·k + n(n+1)/2), D the decoding requests, C their summed context, and launch(D) the
// GraphLaunch of a captured batch size or the EagerLaunch beyond.
type Roofline struct {
	WeightsMS       float64 // reading the weights once (per GPU under TP)
	FLOPTokenMS     float64 // the GEMMs of one token
	AttnPairMS      float64 // prefill attention per (query, context) pair
	KVTokenMS       float64 // reading one context token's KV in decode
	CommTokenMS     float64 // tensor-parallel all-reduce bandwidth per prefill token (0 on one GPU)
	CommLatencyMS   float64 // tensor-parallel all-reduce latency per step (0 on one GPU)
	PrefillOverhead float64 // scheduling and launch of a prefill batch (not graph-captured)
	GraphLaunch     float64 // replaying a captured decode graph
	EagerLaunch     float64 // launching a decode step kernel by kernel
	SampleMS        float64 // logits and sampling per decoding request
}

// PrefillMS is the duration of a prefill batch of tokens new tokens with attnPairs pairs.
func (m Roofline) PrefillMS(tokens int, attnPairs float64) float64 {
	t := float64(tokens)
	return m.PrefillOverhead + max(m.WeightsMS, m.FLOPTokenMS*t) + m.CommTokenMS*t + m.AttnPairMS*attnPairs + m.CommLatencyMS
}

// DecodeMS is the duration of a decode batch of decodes requests with kvTokens context tokens
// in all; graphMax is the largest graph-captured batch.
func (m Roofline) DecodeMS(decodes, kvTokens, graphMax int) float64 {
	launch := m.GraphLaunch
	if decodes > graphMax {
		launch = m.EagerLaunch
	}
	d := float64(decodes)
	return launch + m.CommLatencyMS + max(m.WeightsMS+m.KVTokenMS*float64(kvTokens), m.FLOPTokenMS*d) + m.SampleMS*d
}

// SGLang preset names.
const (
	PresetSGLangH100_8B  = "sglang-h100-8b"
	PresetSGLangH100x870 = "sglang-h100x8-70b"
)

// Facts the SGLang presets use beyond model.go's (H100 SXM: 989 TFLOP/s, 3.35 TB/s, 80 GB;
// Llama 3 8B and 70B shapes):
//
//   - mem_fraction_static, SGLang's share of GPU memory for weights plus the KV pool
//     (server_args): 0.88 at TP1, 0.81 at TP8. What is left holds activations and CUDA graphs.
//   - NVLink 4 on H100 SXM: 900 GB/s per GPU both ways (450 GB/s each way); nccl-tests report
//     ~360 GB/s all-reduce bus bandwidth on eight H100s, so an all-reduce of S bytes takes
//     2·(8−1)/8·S / 360 GB/s. A Llama layer all-reduces twice, hidden × 2 bytes per token.
//
// Assumptions (not measured; chosen independently of the vLLM presets' on purpose, so that
// the two models do not share their guesses): GEMM efficiency 60 % of peak on one GPU and
// 50 % under TP8 (SGLang's CUTLASS/FlashInfer kernels), prefill attention 45 %, a small-message
// all-reduce 12 µs (SGLang's custom all-reduce), 1.5 ms of scheduling and launch per prefill
// batch, 0.3 ms to replay a decode graph and 2.5 ms (TP1) / 4 ms (TP8) to launch an eager
// decode step, 8 µs of sampling per decoding request.
const (
	sglMemFracTP1 = 0.88
	sglMemFracTP8 = 0.81
	nvlinkBusBW   = 360e9 // bytes/s, all-reduce bus bandwidth on eight H100 SXM
	sglAllReduce  = 0.012 // ms per small all-reduce
)

// sglangDefaults are SGLang's scheduler defaults (see SGLangParams).
func sglangDefaults(graphMaxBS int, cost Roofline) *SGLangParams {
	return &SGLangParams{
		ChunkedPrefillSize: 8192, MaxPrefillTokens: 16384, MaxRunningRequests: 4096,
		LPM: true, LPMQueueLimit: 128,
		InitNewTokenRatio: 0.7, MinNewTokenRatio: 0.7 * 0.14, NewTokenRatioDecaySteps: 600,
		RetractDecodeSteps: 20, ClipMaxNewTokens: 4096, CUDAGraphMaxBS: graphMaxBS, Cost: cost,
	}
}

// sglangH100Llama8B is Llama-3-8B in BF16 on one H100 SXM under SGLang's defaults:
//
//   - WeightsMS = 16.06 GB / 3.35 TB/s = 4.79 ms.
//   - FLOPTokenMS = 2 × 8.03e9 / (989e12 × 0.60) = 0.0271 ms (≈ 37 K prefill tokens/s).
//   - AttnPairMS = 4 × 32 × 4096 / (989e12 × 0.45) = 1.18e-6 ms.
//   - KVTokenMS = 131072 B / 3.35 TB/s = 3.9e-5 ms.
//   - KV pool: 0.88 × 80 GB − 16.06 GB = 54.3 GB at 131072 B per token ≈ 414 K tokens.
func sglangH100Llama8B() Spec {
	kvBytes := 2.0 * 32 * 8 * 128 * 2
	cost := Roofline{
		WeightsMS:       2 * llama8BParams / h100BW * 1e3,
		FLOPTokenMS:     2 * llama8BParams / (h100FLOPs * 0.60) * 1e3,
		AttnPairMS:      4 * 32 * 4096 / (h100FLOPs * 0.45) * 1e3,
		KVTokenMS:       kvBytes / h100BW * 1e3,
		PrefillOverhead: 1.5, GraphLaunch: 0.3, EagerLaunch: 2.5, SampleMS: 0.008,
	}
	p := sglangDefaults(256, cost)
	return Spec{
		Name: PresetSGLangH100_8B, SGLang: p,
		KVTokens:            int((sglMemFracTP1*h100Mem - 2*llama8BParams) / kvBytes),
		MaxNumBatchedTokens: p.ChunkedPrefillSize, MaxNumSeqs: p.MaxRunningRequests,
		About: "SGLang-style engine (radix cache, LPM, prefill-first, retraction): Llama-3-8B-class, BF16, one H100 SXM",
	}
}

// sglangH100x8Llama70B is Llama-3-70B in BF16, TP8 over eight H100 SXM, under SGLang's
// defaults:
//
//   - WeightsMS = 141.2 GB / 8 / 3.35 TB/s = 5.27 ms.
//   - FLOPTokenMS = 2 × 70.6e9 / (8 × 989e12 × 0.50) = 0.0357 ms.
//   - CommTokenMS = 2 × 80 all-reduces × 8192 × 2 B × 1.75 / 360 GB/s = 0.0127 ms per token.
//   - CommLatencyMS = 2 × 80 × 12 µs = 1.92 ms per step.
//   - AttnPairMS = 4 × 80 × 8192 / (8 × 989e12 × 0.45) = 7.4e-7 ms.
//   - KVTokenMS = 327680 B / (8 × 3.35 TB/s) = 1.22e-5 ms.
//   - KV pool: 8 × 0.81 × 80 GB − 141.2 GB = 377 GB at 327680 B per token ≈ 1.15 M tokens.
func sglangH100x8Llama70B() Spec {
	kvBytes := 2.0 * 80 * 8 * 128 * 2
	cost := Roofline{
		WeightsMS:       2 * llama70BParams / 8 / h100BW * 1e3,
		FLOPTokenMS:     2 * llama70BParams / (8 * h100FLOPs * 0.50) * 1e3,
		CommTokenMS:     2 * 80 * 8192 * 2 * (2 * 7.0 / 8) / nvlinkBusBW * 1e3,
		CommLatencyMS:   2 * 80 * sglAllReduce,
		AttnPairMS:      4 * 80 * 8192 / (8 * h100FLOPs * 0.45) * 1e3,
		KVTokenMS:       kvBytes / (8 * h100BW) * 1e3,
		PrefillOverhead: 1.5, GraphLaunch: 0.3, EagerLaunch: 4, SampleMS: 0.008,
	}
	p := sglangDefaults(512, cost)
	return Spec{
		Name: PresetSGLangH100x870, SGLang: p,
		KVTokens:            int((8*sglMemFracTP8*h100Mem - 2*llama70BParams) / kvBytes),
		MaxNumBatchedTokens: p.ChunkedPrefillSize, MaxNumSeqs: p.MaxRunningRequests,
		About: "SGLang-style engine (radix cache, LPM, prefill-first, retraction): Llama-3-70B-class, BF16, TP8 over eight H100 SXM",
	}
}

// sglangPresets are the independent engine model's presets. They are reachable through
// Preset and listed by IndependentPresets, but not by Presets/PresetNames, so the default
// robustness matrix (and its results files) stay as they were.
var sglangPresets = []Spec{sglangH100Llama8B(), sglangH100x8Llama70B()}

// IndependentPresets returns the presets of the SGLang-style engine: a second engine model,
// designed apart from the vLLM one, to check that routing quality does not depend on one
// model's quirks.
func IndependentPresets() []Spec { return slices.Clone(sglangPresets) }
