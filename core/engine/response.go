package engine

// SelectResponse is the body returned by /select and /select_and_reserve. Absent optionals are
// omitted from JSON, never null.
type SelectResponse struct {
	SelectionID *string `json:"selection_id,omitempty"`
	// *Booked is set only for bookings (select_and_reserve): it adds sequence_hashes,
	// isl_tokens and track_prefill_tokens to the JSON.
	*Booked
	ModelName              string         `json:"model_name"`
	RoutingGroup           string         `json:"routing_group"`
	WorkerID               uint64         `json:"worker_id"`
	DPRank                 uint32         `json:"dp_rank"`
	Endpoint               string         `json:"endpoint"`
	BlockSize              uint32         `json:"block_size"`
	Overlap                OverlapSummary `json:"overlap"`
	EffectivePrefillTokens uint64         `json:"effective_prefill_tokens"`
	PotentialDecodeBlocks  uint64         `json:"potential_decode_blocks"`
	DecodeBusy             *bool          `json:"decode_busy,omitempty"`
	WorkerLoad             *WorkerLoad    `json:"worker_load,omitempty"`
	KVHint                 *KVHint        `json:"kv_hint,omitempty"`
}

// Booked holds the normalized booking inputs echoed by select_and_reserve.
type Booked struct {
	SequenceHashes     []int64 `json:"sequence_hashes"`
	ISLTokens          uint64  `json:"isl_tokens"`
	TrackPrefillTokens bool    `json:"track_prefill_tokens"`
}

// OverlapSummary is the Mooncake per-instance tier summary of the selected worker, in tokens:
// gpu ≤ cpu ≤ disk, longest_matched = max of the three, dp = device tokens per rank of the
// selected worker's DP range (zero-overlap ranks included).
type OverlapSummary struct {
	LongestMatched uint64            `json:"longest_matched"`
	GPU            uint64            `json:"gpu"`
	DP             map[string]uint64 `json:"dp"`
	CPU            uint64            `json:"cpu"`
	Disk           uint64            `json:"disk"`
}

// WorkerLoad is the chosen rank's projected load, returned by advisory selections.
type WorkerLoad struct {
	ActivePrefillTokens  uint64  `json:"active_prefill_tokens"`
	PrefillTokenCapacity uint64  `json:"prefill_token_capacity"`
	TotalKVBlocks        *uint64 `json:"total_kv_blocks,omitempty"`
	PrefillBusy          *bool   `json:"prefill_busy,omitempty"`
}

// KVHint is the versioned action envelope that tells the target which worker holds a longer
// cached prefix it can fetch.
type KVHint struct {
	ProtocolVersion string         `json:"protocol_version"`
	MessageID       string         `json:"message_id"`
	Actions         []KVHintAction `json:"actions"`
}

// KVHintAction is one action of a KVHint.
type KVHintAction struct {
	ActionID      string        `json:"action_id"`
	ActionType    string        `json:"action_type"`
	ActionVersion string        `json:"action_version"`
	Payload       KVHintPayload `json:"payload"`
}

// KVHintPayload names the source and the root-aligned external sequence hashes to fetch.
type KVHintPayload struct {
	SourceControlEndpoint string  `json:"source_control_endpoint"`
	BlockHashes           []int64 `json:"block_hashes"`
}
