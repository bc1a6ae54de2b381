package api

import (
	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

// Decoding tables of every request body the API accepts. Each lists the JSON names of its Go
// struct's fields exactly once (TestTablesCoverStructs checks them against the structs' json
// tags by reflection, so a field added in core/engine without a row here fails the tests
// instead of being silently ignored).

// Field constructors: name, reader of the value, accessor of the destination. The accessor
// is a tiny closure returning the address of one field, so a row is a single line and the
// compiler checks that its reader's type matches the field's: a row cannot decode a u32 into a
// u64 field. What the compiler cannot check (a wrong JSON name, a missing or extra row) the
// coverage test does.

func fOpt[T, V any](name string, read reader[V], get func(*T) **V) field[T] {
	return field[T]{name, func(d *decoder, v *T) error { return opt(d, get(v), read) }}
}

func fScalar[T, V any](name string, read reader[V], get func(*T) *V) field[T] {
	return field[T]{name, func(d *decoder, v *T) error { return scalar(d, get(v), read) }}
}

func fSlice[T, V any](name string, read reader[V], get func(*T) *[]V) field[T] {
	return field[T]{name, func(d *decoder, v *T) error { return slice(d, get(v), read) }}
}

func fMap[T, V any](name string, read reader[V], get func(*T) *map[string]V) field[T] {
	return field[T]{name, func(d *decoder, v *T) error { return mapOf(d, get(v), read) }}
}

func fObj[T, V any](name string, t *structTable[V], get func(*T) **V) field[T] {
	return field[T]{name, func(d *decoder, v *T) error { return optObject(d, get(v), t) }}
}

// Readers for element types. The scalar ones are method expressions; the composite ones read
// a slice or a nested struct and exist so that slices and maps of them reuse the generic
// helpers. readBlockExtra returns a fresh pointer per element, as encoding/json allocates one
// for each non-null element of a []*T.
var (
	readText = (*decoder).text
	readU64  = (*decoder).u64
	readU32  = (*decoder).u32
	readF64  = (*decoder).f64
	readF32  = (*decoder).f32
	readBool = (*decoder).boolean

	readStrings = func(d *decoder) ([]string, error) {
		var s []string
		err := slice(d, &s, readText)
		return s, err
	}
	readBlockExtra = func(d *decoder) (*engine.BlockExtraInfo, error) {
		v := new(engine.BlockExtraInfo)
		return v, object(d, v, blockExtraTable)
	}
	readMMObject = func(d *decoder) (engine.MMObject, error) {
		var v engine.MMObject
		return v, object(d, &v, mmObjectTable)
	}
)

// The multimodal tables: mm_routing_info { routing_token_ids, block_mm_infos }, where each
// block's info lists mm_objects { mm_hash, offsets: [[start, end], ...] }. They are rare (only
// multimodal prompts carry them) but decoded strictly like the rest.
var mmObjectTable = newTable("struct MMObject", []field[engine.MMObject]{
	fScalar("mm_hash", readU64, func(v *engine.MMObject) *uint64 { return &v.MMHash }),
	fSlice("offsets", (*decoder).pairU64, func(v *engine.MMObject) *[][2]uint64 { return &v.Offsets }),
})

var blockExtraTable = newTable("struct BlockExtraInfo", []field[engine.BlockExtraInfo]{
	fSlice("mm_objects", readMMObject, func(v *engine.BlockExtraInfo) *[]engine.MMObject { return &v.MMObjects }),
})

var mmRoutingTable = newTable("struct MMRoutingInfo", []field[engine.MMRoutingInfo]{
	{"routing_token_ids", func(d *decoder, v *engine.MMRoutingInfo) error { return d.u32s(&v.RoutingTokenIDs) }},
	fSlice("block_mm_infos", readBlockExtra, func(v *engine.MMRoutingInfo) *[]*engine.BlockExtraInfo { return &v.BlockMMInfos }),
})

// promptFields are engine.Prompt's, embedded in three request bodies (select, reservation,
// prompt query). They are lifted into each body's table by embed, so a prompt field given twice
// is a duplicate of the body, exactly as if it were declared there.
var promptFields = []field[engine.Prompt]{
	{"token_ids", func(d *decoder, p *engine.Prompt) error { return d.u32s(&p.TokenIDs) }},
	fObj("mm_routing_info", mmRoutingTable, func(p *engine.Prompt) **engine.MMRoutingInfo { return &p.MMRoutingInfo }),
	fSlice("block_mm_infos", readBlockExtra, func(p *engine.Prompt) *[]*engine.BlockExtraInfo { return &p.BlockMMInfos }),
	{"block_hashes", func(d *decoder, p *engine.Prompt) error { return d.i64s(&p.BlockHashes) }},
	{"sequence_hashes", func(d *decoder, p *engine.Prompt) error { return d.i64s(&p.SequenceHashes) }},
	fOpt("isl_tokens", readU64, func(p *engine.Prompt) **uint64 { return &p.ISLTokens }),
	fOpt("lora_name", readText, func(p *engine.Prompt) **string { return &p.LoraName }),
	fOpt("cache_salt", readText, func(p *engine.Prompt) **string { return &p.CacheSalt }),
	fOpt("is_eagle", readBool, func(p *engine.Prompt) **bool { return &p.IsEagle }),
}

var configOverrideTable = newTable("struct ConfigOverride", []field[engine.ConfigOverride]{
	fOpt("overlap_score_credit", readF64, func(v *engine.ConfigOverride) **float64 { return &v.OverlapScoreCredit }),
	fOpt("prefill_load_scale", readF64, func(v *engine.ConfigOverride) **float64 { return &v.PrefillLoadScale }),
	fOpt("overlap_score_weight", readF64, func(v *engine.ConfigOverride) **float64 { return &v.OverlapScoreWeight }),
	fOpt("router_temperature", readF64, func(v *engine.ConfigOverride) **float64 { return &v.RouterTemperature }),
	fOpt("assume_kv_reuse", readBool, func(v *engine.ConfigOverride) **bool { return &v.AssumeKVReuse }),
	fOpt("track_prefill_tokens", readBool, func(v *engine.ConfigOverride) **bool { return &v.TrackPrefillTokens }),
	fOpt("shared_cache_multiplier", readF64, func(v *engine.ConfigOverride) **float64 { return &v.SharedCacheMultiplier }),
})

var sessionContextTable = newTable("struct SessionContext", []field[engine.SessionContext]{
	fOpt("session_id", readText, func(v *engine.SessionContext) **string { return &v.SessionID }),
	fOpt("parent_session_id", readText, func(v *engine.SessionContext) **string { return &v.ParentSessionID }),
	fOpt("session_final", readBool, func(v *engine.SessionContext) **bool { return &v.SessionFinal }),
	fOpt("input_trigger", readText, func(v *engine.SessionContext) **string { return &v.InputTrigger }),
	fMap("agent_headers", readStrings, func(v *engine.SessionContext) *map[string][]string { return &v.AgentHeaders }),
})

var affinityTargetTable = newTable("struct AffinityTarget", []field[engine.AffinityTarget]{
	fOpt("worker_id", readU64, func(v *engine.AffinityTarget) **uint64 { return &v.WorkerID }),
	fOpt("dp_rank", readU32, func(v *engine.AffinityTarget) **uint32 { return &v.DPRank }),
})

var pinnedWorkerTable = newTable("struct PinnedWorker", []field[engine.PinnedWorker]{
	fOpt("worker_id", readU64, func(v *engine.PinnedWorker) **uint64 { return &v.WorkerID }),
	fOpt("dp_rank", readU32, func(v *engine.PinnedWorker) **uint32 { return &v.DPRank }),
})

var routingConstraintsTable = newTable("struct RoutingConstraints", []field[engine.RoutingConstraints]{
	fSlice("required_taints", readText, func(v *engine.RoutingConstraints) *[]string { return &v.RequiredTaints }),
	fMap("preferred_taints", readF32, func(v *engine.RoutingConstraints) *map[string]float32 { return &v.PreferredTaints }),
})

// selectRequestTable decodes POST /select and /select_and_reserve: 14 own fields plus the 9
// prompt fields (23 of the 64 the duplicate check can track). PolicyClass is json:"-" and comes
// from a header, so it has no row.
var selectRequestTable = newTable("struct SelectRequest", []field[core.SelectRequest]{
	fOpt("model_name", readText, func(v *core.SelectRequest) **string { return &v.ModelName }),
	fOpt("routing_group", readText, func(v *core.SelectRequest) **string { return &v.RoutingGroup }),
	fOpt("selection_id", readText, func(v *core.SelectRequest) **string { return &v.SelectionID }),
	fObj("router_config_override", configOverrideTable, func(v *core.SelectRequest) **engine.ConfigOverride { return &v.RouterConfigOverride }),
	fOpt("expected_output_tokens", readU32, func(v *core.SelectRequest) **uint32 { return &v.ExpectedOutputTokens }),
	fOpt("priority_jump", readF64, func(v *core.SelectRequest) **float64 { return &v.PriorityJump }),
	fOpt("strict_priority", readU32, func(v *core.SelectRequest) **uint32 { return &v.StrictPriority }),
	fOpt("session_id", readText, func(v *core.SelectRequest) **string { return &v.SessionID }),
	fObj("session_context", sessionContextTable, func(v *core.SelectRequest) **engine.SessionContext { return &v.SessionContext }),
	fObj("affinity_target", affinityTargetTable, func(v *core.SelectRequest) **engine.AffinityTarget { return &v.AffinityTarget }),
	fObj("pinned_worker", pinnedWorkerTable, func(v *core.SelectRequest) **engine.PinnedWorker { return &v.PinnedWorker }),
	fSlice("allowed_worker_ids", readU64, func(v *core.SelectRequest) *[]uint64 { return &v.AllowedWorkerIDs }),
	fObj("routing_constraints", routingConstraintsTable, func(v *core.SelectRequest) **engine.RoutingConstraints { return &v.RoutingConstraints }),
	fScalar("advisory", readBool, func(v *core.SelectRequest) *bool { return &v.Advisory }),
}, embed(promptFields, func(v *core.SelectRequest) *engine.Prompt { return &v.Prompt }))

// reservationRequestTable decodes POST /reservations (both the replay form, which carries only
// selection_id and the partition, and the explicit form with worker and prompt).
var reservationRequestTable = newTable("struct ReservationRequest", []field[core.ReservationRequest]{
	fOpt("model_name", readText, func(v *core.ReservationRequest) **string { return &v.ModelName }),
	fOpt("routing_group", readText, func(v *core.ReservationRequest) **string { return &v.RoutingGroup }),
	fOpt("selection_id", readText, func(v *core.ReservationRequest) **string { return &v.SelectionID }),
	fOpt("worker_id", readU64, func(v *core.ReservationRequest) **uint64 { return &v.WorkerID }),
	fOpt("dp_rank", readU32, func(v *core.ReservationRequest) **uint32 { return &v.DPRank }),
	fObj("router_config_override", configOverrideTable, func(v *core.ReservationRequest) **engine.ConfigOverride { return &v.RouterConfigOverride }),
	fOpt("expected_output_tokens", readU32, func(v *core.ReservationRequest) **uint32 { return &v.ExpectedOutputTokens }),
	fOpt("effective_prefill_tokens", readU64, func(v *core.ReservationRequest) **uint64 { return &v.EffectivePrefillTokens }),
	fOpt("track_prefill_tokens", readBool, func(v *core.ReservationRequest) **bool { return &v.TrackPrefillTokens }),
}, embed(promptFields, func(v *core.ReservationRequest) *engine.Prompt { return &v.Prompt }))

// promptQueryTable decodes POST /potential_loads and /overlap_scores.
var promptQueryTable = newTable("struct PromptQuery", []field[core.PromptQuery]{
	fOpt("model_name", readText, func(v *core.PromptQuery) **string { return &v.ModelName }),
	fOpt("routing_group", readText, func(v *core.PromptQuery) **string { return &v.RoutingGroup }),
	fObj("router_config_override", configOverrideTable, func(v *core.PromptQuery) **engine.ConfigOverride { return &v.RouterConfigOverride }),
}, embed(promptFields, func(v *core.PromptQuery) *engine.Prompt { return &v.Prompt }))

// workerSpecTable decodes POST /workers and PATCH /workers/{id} (WorkerPatch is an alias of
// WorkerSpec). Required fields are checked by the engine after decoding, so a missing
// worker_id, or one sent as "Worker_ID", is the engine's 422 "missing field `worker_id`".
var workerSpecTable = newTable("struct WorkerSpec", []field[core.WorkerSpec]{
	fOpt("worker_id", readU64, func(v *core.WorkerSpec) **uint64 { return &v.WorkerID }),
	fOpt("model_name", readText, func(v *core.WorkerSpec) **string { return &v.ModelName }),
	fOpt("routing_group", readText, func(v *core.WorkerSpec) **string { return &v.RoutingGroup }),
	fOpt("endpoint", readText, func(v *core.WorkerSpec) **string { return &v.Endpoint }),
	fOpt("kv_events_endpoint", readText, func(v *core.WorkerSpec) **string { return &v.KVEventsEndpoint }),
	fMap("kv_events_endpoints", readText, func(v *core.WorkerSpec) *map[string]string { return &v.KVEventsEndpoints }),
	fOpt("replay_endpoint", readText, func(v *core.WorkerSpec) **string { return &v.ReplayEndpoint }),
	fOpt("block_size", readU32, func(v *core.WorkerSpec) **uint32 { return &v.BlockSize }),
	fOpt("data_parallel_start_rank", readU32, func(v *core.WorkerSpec) **uint32 { return &v.DataParallelStartRank }),
	fOpt("data_parallel_size", readU32, func(v *core.WorkerSpec) **uint32 { return &v.DataParallelSize }),
	fOpt("max_num_batched_tokens", readU64, func(v *core.WorkerSpec) **uint64 { return &v.MaxNumBatchedTokens }),
	fOpt("total_kv_blocks", readU64, func(v *core.WorkerSpec) **uint64 { return &v.TotalKVBlocks }),
	fOpt("stable_routing_id", readText, func(v *core.WorkerSpec) **string { return &v.StableRoutingID }),
	fOpt("is_eagle", readBool, func(v *core.WorkerSpec) **bool { return &v.IsEagle }),
	fSlice("taints", readText, func(v *core.WorkerSpec) *[]string { return &v.Taints }),
	fMap("topology_domains", readText, func(v *core.WorkerSpec) *map[string]string { return &v.TopologyDomains }),
	fOpt("kv_transfer_domain", readText, func(v *core.WorkerSpec) **string { return &v.KVTransferDomain }),
	fOpt("kv_transfer_enforcement", readText, func(v *core.WorkerSpec) **string { return &v.KVTransferEnforcement }),
	fOpt("kv_transfer_preferred_weight", readF32, func(v *core.WorkerSpec) **float32 { return &v.KVTransferPreferredWeight }),
	fOpt("router_hint_worker_type", readText, func(v *core.WorkerSpec) **string { return &v.RouterHintWorkerType }),
	fMap("router_hint_source_control_endpoints", readText, func(v *core.WorkerSpec) *map[string]string { return &v.RouterHintSourceControlEndpoints }),
	fOpt("kv_event_source_mode", readText, func(v *core.WorkerSpec) **string { return &v.KVEventSourceMode }),
})

// outputBlockTable decodes POST /reservations/{id}/output_block.
var outputBlockTable = newTable("struct OutputBlockRequest", []field[outputBlockRequest]{
	fOpt("decay_fraction", readF64, func(v *outputBlockRequest) **float64 { return &v.DecayFraction }),
})

// peerTable decodes the replica_sync peer routes.
var peerTable = newTable("struct PeerRequest", []field[peerRequest]{
	fOpt("endpoint", readText, func(v *peerRequest) **string { return &v.Endpoint }),
})
