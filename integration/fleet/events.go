package fleet

import "math"

// Request is one request submitted to an engine.
type Request struct {
	ID     int      // the caller's id, echoed in events
	Prompt int      // prompt tokens (≥ 1)
	Output int      // tokens to generate (≥ 1; 0 counts as 1)
	Blocks []uint64 // prompt block ids, one per BlockSize tokens (the last may be partial)
}

// EventKind names what an Event reports.
type EventKind uint8

const (
	// Scheduled: the request was scheduled for the first time; CachedTokens of its prompt
	// were found in the prefix cache, and Waited tells that an earlier step passed it over.
	Scheduled EventKind = iota
	// Stored: Blocks (the request's block ids, one contiguous run starting at index First of
	// its Blocks) entered the prefix cache; Parent is the id of the block before the run
	// (HasParent false at the root).
	Stored
	// Removed: Blocks were evicted from the prefix cache.
	Removed
	// FirstToken: the request's prefill completed and its first token was sampled.
	FirstToken
	// Finished: the request sampled its last token and freed its blocks.
	Finished
	// Preempted: the request lost its blocks to make room and went back to waiting.
	Preempted
	// Rejected: the request can never fit the KV cache; it was dropped at submission.
	Rejected
)

// Event is one thing an engine did. Req is -1 for Removed.
type Event struct {
	Kind         EventKind
	Req          int
	First        int
	CachedTokens int
	Waited       bool
	Parent       uint64
	HasParent    bool
	Blocks       []uint64
}

// Stats is an engine's observable state, what vLLM's /metrics exposes.
type Stats struct {
	Running     int     // requests in the running batch (vllm:num_requests_running)
	Waiting     int     // requests waiting (vllm:num_requests_waiting)
	KVUsage     float64 // fraction of blocks held by requests (vllm:kv_cache_usage_perc)
	UsedBlocks  int
	NumBlocks   int
	Preemptions int // total so far (vllm:num_preemptions)
	// CachedBlocks counts the blocks in the prefix cache, referenced or not.
	CachedBlocks int
}

// Worker is one simulated engine. Time is the caller's, in milliseconds, and must not go
// backwards. Submit and Advance append the events they cause to out and return it.
type Worker interface {
	// Submit hands the engine a request at now (an idle engine starts a step at once).
	Submit(now float64, r *Request, out []Event) []Event
	// NextAt is when the engine's next internal event happens (+Inf when idle).
	NextAt() float64
	// Advance completes the work due at NextAt and starts what follows.
	Advance(out []Event) []Event
	// CachedPrefix is how many prompt tokens of blocks (a prompt of prompt tokens) the engine
	// would find cached now. It is the simulator's ground truth, never a policy's input.
	CachedPrefix(blocks []uint64, prompt int) int
	// Stats returns the engine's observable state.
	Stats() Stats
}

// New builds an engine for spec with numBlocks blocks of blockSize tokens (numBlocks 0 takes
// the spec's capacity).
func New(spec Spec, blockSize, numBlocks int) Worker {
	if numBlocks <= 0 {
		numBlocks = spec.NumBlocks(blockSize)
	}
	if spec.Legacy {
		return newLegacy(blockSize, numBlocks)
	}
	return NewControllable(spec, blockSize, numBlocks)
}

// Controllable is a realistic engine the mock worker drives: a Worker that also aborts a
// request (vLLM's abort_request, SGLang's abort) and empties its prefix cache when idle
// (reset_prefix_cache, flush_cache).
type Controllable interface {
	Worker
	Abort(id int) bool
	ResetPrefixCache() bool
}

// NewControllable builds the realistic engine of spec (spec.Legacy is ignored): the
// SGLang-style one when spec.SGLang is set, else the vLLM-style one.
func NewControllable(spec Spec, blockSize, numBlocks int) Controllable {
	if spec.SGLang != nil {
		return NewSGLang(spec, blockSize, numBlocks)
	}
	return NewEngine(spec, blockSize, numBlocks)
}

var inf = math.Inf(1)

// chainKey is block key i from key i−1 and block id i (a splitmix64 finaliser over both).
func chainKey(parent, id uint64) uint64 {
	x := parent*0x9e3779b97f4a7c15 ^ id
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// rootKey is the chain's seed (vLLM's NONE_HASH).
const rootKey = 0x6b76_7365_6c65_6374

// promptKeys are the chained keys of r's complete prompt blocks (both engine models).
func promptKeys(r *Request, bs int) []uint64 {
	keys := make([]uint64, min(len(r.Blocks), r.Prompt/bs))
	k := uint64(rootKey)
	for i := range keys {
		k = chainKey(k, r.Blocks[i])
		keys[i] = k
	}
	return keys
}
