package engine

import (
	"math"
)

// SelectRequest is the body of POST /select and POST /select_and_reserve.
type SelectRequest struct {
	ModelName    *string `json:"model_name,omitempty"`
	RoutingGroup *string `json:"routing_group,omitempty"`
	// SelectionID is echoed. On /select it caches the booking inputs for a later
	// POST /reservations; on /select_and_reserve it is the booking id (generated when absent).
	SelectionID *string `json:"selection_id,omitempty"`
	Prompt
	RouterConfigOverride *ConfigOverride     `json:"router_config_override,omitempty"`
	ExpectedOutputTokens *uint32             `json:"expected_output_tokens,omitempty"`
	PriorityJump         *float64            `json:"priority_jump,omitempty"`
	StrictPriority       *uint32             `json:"strict_priority,omitempty"`
	SessionID            *string             `json:"session_id,omitempty"`
	SessionContext       *SessionContext     `json:"session_context,omitempty"`
	AffinityTarget       *AffinityTarget     `json:"affinity_target,omitempty"`
	PinnedWorker         *PinnedWorker       `json:"pinned_worker,omitempty"`
	AllowedWorkerIDs     []uint64            `json:"allowed_worker_ids,omitempty"`
	RoutingConstraints   *RoutingConstraints `json:"routing_constraints,omitempty"`
	// Advisory selects from current state without queue admission; ignored by
	// select_and_reserve, which always books.
	Advisory bool `json:"advisory,omitempty"`
	// PolicyClass comes from the x-dynamo-meta-policy-class header, not the body.
	PolicyClass string `json:"-"`
	// Busy, when set, is the busy rule of the router-queue policy class the request belongs to
	// (set by core, never decoded): it replaces router_queue_threshold in the admission check.
	Busy *BusyRule `json:"-"`
}

// BusyRule says when a rank is too busy to admit a request: its active prefill tokens exceed
// Tokens, or exceed Frac × its max_num_batched_tokens (either test; an absent one never fires).
// A request is refused (or queued) when every eligible rank is busy, or with Ratio when at
// least Ratio × the eligible ranks are (Dynamo's busy_worker_ratio, in (0, 1]).
type BusyRule struct {
	Tokens *uint64
	Frac   *float64
	Ratio  *float64
}

// SessionContext is the session metadata a frontend hands to worker selection. When present,
// the flat session_id is ignored.
type SessionContext struct {
	SessionID       *string             `json:"session_id"`
	ParentSessionID *string             `json:"parent_session_id,omitempty"`
	SessionFinal    *bool               `json:"session_final,omitempty"`
	InputTrigger    *string             `json:"input_trigger,omitempty"`
	AgentHeaders    map[string][]string `json:"agent_headers,omitempty"`
}

// AffinityTarget is a soft target: preferred while eligible.
type AffinityTarget struct {
	WorkerID *uint64 `json:"worker_id"`
	DPRank   *uint32 `json:"dp_rank,omitempty"`
}

// PinnedWorker is a hard target.
type PinnedWorker struct {
	WorkerID *uint64 `json:"worker_id"`
	DPRank   *uint32 `json:"dp_rank"`
}

// RoutingConstraints restricts (required) or biases (preferred) candidates by taint.
type RoutingConstraints struct {
	RequiredTaints  []string           `json:"required_taints,omitempty"`
	PreferredTaints map[string]float32 `json:"preferred_taints,omitempty"`
}

// ConfigOverride is a per-request router_config_override.
type ConfigOverride struct {
	OverlapScoreCredit    *float64 `json:"overlap_score_credit,omitempty"`
	PrefillLoadScale      *float64 `json:"prefill_load_scale,omitempty"`
	OverlapScoreWeight    *float64 `json:"overlap_score_weight,omitempty"` // deprecated alias
	RouterTemperature     *float64 `json:"router_temperature,omitempty"`
	AssumeKVReuse         *bool    `json:"assume_kv_reuse,omitempty"`
	TrackPrefillTokens    *bool    `json:"track_prefill_tokens,omitempty"`
	SharedCacheMultiplier *float64 `json:"shared_cache_multiplier,omitempty"`
}

// Validate applies the deserialisation-time checks Dynamo makes (violations are 422).
func (o *ConfigOverride) Validate() error {
	if o == nil {
		return nil
	}
	bad := func(v *float64) bool { return v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0) }
	switch {
	case bad(o.OverlapScoreCredit):
		return unprocessable("router_config_override: overlap_score_credit must be a finite, non-negative number")
	case bad(o.PrefillLoadScale):
		return unprocessable("router_config_override: prefill_load_scale must be greater than or equal to 0")
	case bad(o.OverlapScoreWeight):
		return unprocessable("router_config_override: overlap_score_weight must be greater than or equal to 0")
	case bad(o.RouterTemperature):
		return unprocessable("router_config_override: router_temperature must be greater than or equal to 0")
	case o.SharedCacheMultiplier != nil && !(*o.SharedCacheMultiplier >= 0 && *o.SharedCacheMultiplier <= 1):
		return unprocessable("router_config_override: shared_cache_multiplier must be between 0 and 1")
	}
	return nil
}

// Validate checks required nested fields and value ranges that serde enforces (422).
func (r *SelectRequest) Validate() error {
	if err := r.RouterConfigOverride.Validate(); err != nil {
		return err
	}
	if sc := r.SessionContext; sc != nil {
		if sc.SessionID == nil {
			return unprocessable("session_context: missing field `session_id`")
		}
		if t := sc.InputTrigger; t != nil && *t != "user_message" && *t != "tool_result" && *t != "other" {
			return unprocessable("session_context.input_trigger: unknown variant `%s`, expected one of `user_message`, `tool_result`, `other`", *t)
		}
	}
	if r.AffinityTarget != nil && r.AffinityTarget.WorkerID == nil {
		return unprocessable("affinity_target: missing field `worker_id`")
	}
	if pw := r.PinnedWorker; pw != nil {
		if pw.WorkerID == nil {
			return unprocessable("pinned_worker: missing field `worker_id`")
		}
		if pw.DPRank == nil {
			return unprocessable("pinned_worker: missing field `dp_rank`")
		}
	}
	return nil
}

// sessionID returns the request's session identity: session_context.session_id wins.
func (r *SelectRequest) sessionID() string {
	if r.SessionContext != nil && r.SessionContext.SessionID != nil {
		return *r.SessionContext.SessionID
	}
	return deref(r.SessionID, "")
}

// weights are the cost-function weights after applying a request's override.
type weights struct {
	credit, decay, scale, host, disk, shared, reqWeight, temperature float64
	trackPrefill, assumeReuse                                        bool
	policy                                                           policy       // the cost function (Config.Policy; policy.go)
	prior                                                            PrefillModel // the configured prior prefill-time model (kvselect policy)
	affinity, affinityQueue                                          float64      // affinity weight and its queue scale (kvselect policy)
	missWork                                                         float64      // cap of the queued-work weight of a miss (kvselect policy)
	reorderSlowdown                                                  float64      // bound of a miss's externality on a reordering partition, in its own TTFT (kvselect policy; 0 = off)
	eviction                                                         float64      // weight of the eviction a miss causes (kvselect policy)
	coldShare                                                        float64      // share of the mean cache heat below which a cache counts as cold (kvselect policy)
	stickShare                                                       float64      // share of a prompt's blocks that makes a rank sticky (kvselect policy)
	evictionMiss                                                     float64      // cap of the miss-work factor of the eviction term (kvselect policy)
	pressure                                                         float64      // weight of the pinned-KV overflow a placement causes (kvselect policy)
	occupancy, occupancyShare                                        float64      // weight of the squared KV occupancy a long request leaves, and the share of capacity that makes it long (kvselect policy)
	decodeCtx                                                        float64      // decode step time per context token over prefill time per token (kvselect policy)
	reqTokens                                                        float64      // prefill tokens each live booking on a rank is priced as (kvselect policy)
	decodeOnce                                                       bool         // the decode term reads a prefix shared by running requests once (kvselect policy)
	fixedSpeed                                                       bool         // price every rank with the prior, not its learned speed
	robust                                                           bool         // consensus speed pricing and per-rank β (kvselect policy)

	// central is the partition's central learned speed, set per selection when centralSpeed
	// (Config.CentralPrefillSpeed) is on (kvselectTerms.price).
	central      PrefillModel
	centralSpeed bool
	// reordered is whether the partition's engines reorder their waiting queues, set per
	// selection when reorderSlowdown is on (load.Tracker.Reordered; kvselect_reorder.go).
	reordered bool
}

// weightsOf is c's weights with no request override.
func weightsOf(c *Config) weights {
	return weights{
		credit: c.OverlapScoreCredit, decay: c.OverlapScoreCreditDecay, scale: c.PrefillLoadScale,
		host: c.HostCacheHitWeight, disk: c.DiskCacheHitWeight, shared: c.SharedCacheMultiplier,
		reqWeight: c.DecodeActiveRequestWeight, temperature: c.Temperature,
		trackPrefill: c.TrackPrefillTokens, assumeReuse: c.AssumeKVReuse, policy: policies[c.Policy],
		prior: c.defaultSpeed(), affinity: c.AffinityWeight, affinityQueue: c.AffinityQueueMS,
		missWork: c.MissWorkWeight, reorderSlowdown: c.ReorderedMissSlowdown, eviction: c.EvictionWeight, coldShare: c.ColdCacheShare, stickShare: c.CacheStickShare, evictionMiss: c.EvictionMissWork, pressure: c.KVPressureWeight, occupancy: c.KVOccupancyWeight, occupancyShare: c.KVOccupancyMinShare, decodeCtx: c.DecodeContextWeight, decodeOnce: c.DecodeSharedPrefixOnce, reqTokens: c.ActiveRequestTokens, fixedSpeed: c.FixedPrefillModel,
		robust:       c.RobustKVSelect,
		centralSpeed: c.CentralPrefillSpeed,
	}
}

func (e *Engine) weightsFor(o *ConfigOverride) weights {
	w := weightsOf(&e.cfg)
	if o == nil {
		return w
	}
	if o.OverlapScoreWeight != nil {
		// Deprecated alias: sets the prefill scale; 0 also disables the overlap credit.
		w.scale = *o.OverlapScoreWeight
		if w.scale == 0 {
			w.credit = 0
		}
	}
	if o.OverlapScoreCredit != nil {
		w.credit = *o.OverlapScoreCredit
	}
	if o.PrefillLoadScale != nil {
		w.scale = *o.PrefillLoadScale
	}
	if o.RouterTemperature != nil {
		w.temperature = *o.RouterTemperature
	}
	if o.AssumeKVReuse != nil {
		w.assumeReuse = *o.AssumeKVReuse
	}
	if o.TrackPrefillTokens != nil {
		w.trackPrefill = *o.TrackPrefillTokens
	}
	if o.SharedCacheMultiplier != nil {
		w.shared = *o.SharedCacheMultiplier
	}
	return w
}
