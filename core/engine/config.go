package engine

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Config is the router configuration that shapes selection and accounting (Dynamo's
// KvRouterConfig, spec §13.1). The zero value is not valid: start from DefaultConfig. Every field
// keeps Dynamo's name and default so that DYN_ROUTER_* settings reproduce Dynamo's behaviour.
type Config struct {
	// Policy names the cost function: PolicyDynamo (Dynamo's formula, spec §5.3, the default of
	// DefaultConfig) or PolicyKVSelect (see kvselect_cost.go and KVSelectDefaults).
	Policy string
	// Prior prefill-time model of the kvselect policy: prefill_ms(t) = A·t² + B·t + C for t
	// uncached tokens. It is only the starting point: each rank's model is learned online from
	// its booking → prefill_complete stretches (core/engine/load/speedtrack.go) and replaces
	// the prior as samples arrive. Defaults: the Dynamo mocker's polynomial, a fit of a single
	// GPU serving a small model; any order-of-magnitude guess works as a prior.
	PrefillModelA, PrefillModelB, PrefillModelC float64
	// PrefillModelK is the prior's cost of cached context: K·t·c ms more for t uncached tokens
	// after c cached ones (load.SpeedModel). Default 0, as the mocker's polynomial (timed by new
	// tokens only). It is the prior of the partition's context share κ = K / (2·A) (B/16384
	// without A; load.ContextShareOf, capped at 4 and quantised to 1/32), which the partition
	// learns with LearnContextCost; each rank's K is then its own speed factor × κ × 2·A.
	PrefillModelK float64
	// LearnContextCost lets each partition learn how much of a prefill's time is its attention
	// to the cached context (the context share, load/speed_context.go) from its ranks'
	// completions, so that the kvselect policy prices a long-context hit and a queue of them at
	// what they cost on an engine that reads the cached KV. Default true; false keeps the share
	// at PrefillModelK's (the behaviour before, with K = 0).
	LearnContextCost bool
	// FixedPrefillModel prices every rank with the prior model instead of its learned one (the
	// behaviour before learning; for reproducing old results). Default false.
	FixedPrefillModel bool
	// CentralPrefillSpeed prices, in the kvselect policy, every rank whose learned speed is
	// within a factor of two of a reference at that reference, the reference being the prior or,
	// when the prior is more than 2× off, the partition's median learned speed
	// (kvselectTerms.price). Default false (opt-in: README, "Learned worker speed").
	CentralPrefillSpeed bool
	// WorkerPrefillModels overrides the prior model per worker id (every rank of the worker; a
	// worker's ranks first registered after the override get it). Optional; see speed.go.
	WorkerPrefillModels map[uint64]PrefillModel
	// MissWorkWeight and EvictionWeight price what a rank's uncached prefill costs others, in
	// the kvselect policy (kvselect_cost.go): the prefill is charged (1 + β + ε·occupancy)
	// times, β the requests its work will delay (kvselectTerms.betaAt: the rank's own pending
	// prefills or the partition's saturation, whichever is more) capped at MissWorkWeight
	// (default 4; 1 before, README "Valuing reuse under load"), and ε = EvictionWeight
	// (default 1) the share of the blocks it stores that evict others' (occupancy:
	// kvselect_eviction.go). 0 turns either off.
	MissWorkWeight float64
	EvictionWeight float64
	// ReorderedMissSlowdown, in the kvselect policy, prices a miss for a partition whose engines
	// reorder their waiting queues (learned from the order of first tokens, load/order.go; SGLang's
	// longest-prefix-match policy): its work counts for the rank's pending prefills uncapped,
	// bounded by ReorderedMissSlowdown times its own estimated time to first token there
	// (kvselect_reorder.go). Default 1; 0 prices every partition as arrival-order.
	ReorderedMissSlowdown float64
	// ColdCacheShare discounts, in the kvselect policy, the eviction a miss causes on a rank
	// whose cache few requests have used lately: a rank booked less than ColdCacheShare of the
	// partition's mean recent prompt tokens (its cache heat, cached and uncached tokens over about
	// one fleet capacity of traffic, load/heat.go) has its occupancy scaled by its heat over that
	// share of the mean (kvselect_eviction.go). Default 0.5; 0 turns the discount off (the default
	// before it: README, "A cache nobody uses"). It needs every rank's total_kv_blocks; without
	// them there is no discount.
	ColdCacheShare float64
	// CacheStickShare is the kvselect policy's cache stickiness (kvselect_stick.go): when some
	// eligible rank holds at least this share of a request's prompt blocks, the request goes to
	// one that does, by cost, or to a rank with KV room for it that is idle or 1.5 times
	// cheaper. Default 0.3 (SGLang's cache_threshold); 0 turns the rule off (the default before
	// it: README, "Cache stickiness").
	CacheStickShare float64
	// EvictionMissWork caps, in the kvselect policy, the miss-work factor β applied to the
	// eviction term: the blocks a miss evicts are recomputed on the same rank when their prefix
	// returns, uncached work that would delay the requests sharing the rank's steps then as a
	// miss's own work does now, so the term is priced at (1 + min(β, EvictionMissWork)) times
	// its recompute (kvselect_eviction.go). Default 0: the recompute priced once, whatever the
	// rank's load. At 1 (the pressure term's cap) it was better on the vLLM- and SGLang-style
	// matrices and worse on the legacy model's overloaded agentic workload, so it is not the
	// default (README, "An eviction's recompute priced for the requests it delays"); the
	// simulator's kvselect-evict runs it.
	EvictionMissWork float64
	// KVPressureWeight prices, in the kvselect policy, the blocks by which a placement would
	// overflow a rank's KV cache with pinned blocks: the rank's active (booked) blocks plus the
	// request's not yet booked ones, beyond its registered total_kv_blocks. A vLLM-style worker
	// makes such a request wait or preempts a running one, which recomputes its context; the
	// overflow is charged as that many blocks of prefill, times this weight
	// (kvselect_pressure.go). Ranks that did not register total_kv_blocks are never charged.
	// Default 1 (overflow priced as recompute; README, "Robustness matrix"); 0 turns it off.
	KVPressureWeight float64
	// KVOccupancyWeight prices, in the kvselect policy, the occupancy a long request leaves its
	// rank's KV cache: (active + new blocks)² / total_kv_blocks blocks of prefill at the rank's
	// priced speed, times this weight, for a request whose blocks are at least
	// KVOccupancyMinShare of the rank's total_kv_blocks (kvselect_occupancy.go). Long contexts
	// that would crowd one rank's cache as they grow spread over ranks with room. Default 2
	// (README, "KV occupancy priced for long requests"); 0 turns it off (the behaviour before).
	// Ranks that did not register total_kv_blocks are never charged.
	KVOccupancyWeight float64
	// KVOccupancyMinShare is the share of a rank's total_kv_blocks a request's blocks must reach
	// for the occupancy term to price it. Default 0.3; 0 prices every request.
	KVOccupancyMinShare float64
	// DecodeContextWeight is, in the kvselect policy, the time a running request's context adds
	// to every step of its rank (its KV read by decode attention), per context token, over the
	// rank's prefill time per token, per unit of the partition's context share κ (see
	// PrefillModelK, LearnContextCost; kvselect_decode.go): the term is weight · κ · B per
	// context token and step, so it is off wherever κ is 0 — an engine timed by new tokens only
	// pays for no context reads, and before the share is learned. A decode step reads each
	// context token's KV (2·layers·kv_heads·head_dim·bytes) at memory bandwidth, a prefill
	// token costs 2·parameters FLOP at compute: Llama-3-8B on an H100 gives 131 KB / 3.35 TB/s
	// over 16 GFLOP / (0.55 × 989 TFLOP/s) ≈ 1.3e-3, a 70B model on 8 H100s ≈ 3e-4; at the
	// shares those engines learn in the simulator (1.16 and 0.45) the default 1e-3 gives
	// 1.2e-3 and 4.5e-4. 0 turns the term off.
	DecodeContextWeight float64
	// ActiveRequestTokens prices, in the kvselect policy, each live booking on a rank (running or
	// waiting for its first token, this replica's and its peers') as this many prefill tokens at
	// the rank's priced per-token cost B: the decode slot and KV it holds until it finishes, for
	// a time the router cannot see (kvselect_requests.go). Default 256 (README, "Live requests
	// priced"); 0 turns it off (the behaviour before). Dynamo's decode_active_request_weight
	// (DecodeActiveRequestWeight, a fixed cost per request) is separate and still applies.
	ActiveRequestTokens float64
	// DecodeSharedPrefixOnce makes the kvselect policy's decode term count a prompt prefix shared
	// by several running requests of a rank once (its active blocks, as the pressure term counts
	// pinned memory) instead of once per request (load.RankLoad.ContextTokens). Per request is
	// what paged attention does — vLLM's and SGLang's default kernels read each request's whole
	// KV every step, shared prefix included — and what the simulator's engine models time;
	// kernels that read a common prefix once for the batch (cascade or shared-prefix attention)
	// are closer to once. Default false; true is the default before (README, "Shared prefixes
	// read per running request").
	DecodeSharedPrefixOnce bool
	// RobustKVSelect selects, in the kvselect policy, the rules measured in README ("Robustness
	// matrix"): each rank's learned speed is priced against the partition's consensus
	// (kvselect_speed.go) instead of within 2× of the prior, and β is per rank
	// (kvselectTerms.betaAt) instead of the partition's mean pending prefills. Default true; false
	// restores the earlier rules, for reproducing older tables (with MissWorkWeight 1, their
	// default then).
	RobustKVSelect bool
	// AffinityWeight is an extra pull of the kvselect policy towards a rank's cached prefix, in
	// multiples of the linear prefill time the cached tokens save, discounted by
	// 1/(1 + queue_ms/AffinityQueueMS) (2000 ms). Default 0: the miss and eviction charges
	// (MissWorkWeight, EvictionWeight) price locality instead; the earlier default, 30, piled hot
	// shared prefixes onto one rank and collapsed overloaded agentic workloads.
	AffinityWeight             float64
	AffinityQueueMS            float64
	OverlapScoreCredit         float64 // credit per device-cached block (1.0)
	OverlapScoreCreditDecay    float64 // credit decay with relative prefill load (0)
	PrefillLoadScale           float64 // weight of the prefill term (1.0)
	DecodeActiveRequestWeight  float64 // cost per active request (0)
	HostCacheHitWeight         float64 // credit per host-pinned extension block (0.75)
	DiskCacheHitWeight         float64 // credit per disk/external extension block (0.25)
	SharedCacheMultiplier      float64 // credit per shared-cache block beyond device (0)
	Temperature                float64 // softmax temperature; 0 = arg-min with random ties
	UseKVEvents                bool    // index from worker ZMQ events (true) or from bookings (false)
	TrackActiveBlocks          bool
	TrackOutputBlocks          bool
	AssumeKVReuse              bool // false: one random tracking hash per block
	TrackPrefillTokens         bool
	TrackingHash               string // "public-xxh3-v1" or "keyed-xxh3-v1"
	TrackingKeyFile            string
	TrackingKeyID              string
	TTL                        time.Duration // approximate-index retention (use_kv_events=false)
	ApproximateCachePolicy     string        // "ttl" or "lru"
	QueueThreshold             *float64      // enables queueing when set
	QueuePolicy                string        // fcfs, lcfs, wspt, aging (kvselect's; rqueue.go)
	PolicyConfig               string        // YAML path (policy classes); enables queueing
	EventThreads               int
	ActiveRequestExpiry        time.Duration  // expiry guard for bookings (300 s)
	DecodeBusyThreshold        *float64       // conditional_disagg_decode_busy_threshold
	PrefillBusyThreshold       *float64       // conditional_disagg_prefill_busy_threshold
	PredictedTTL               *time.Duration // router_predicted_ttl_secs: side index of bookings (predicted.go)
	MinInitialWorkers          int
	SessionAffinityTTL         time.Duration // 0 = off
	SessionAffinityMode        string        // "hard" (default; "" = hard) or "soft" (affinity_mode.go)
	SelectionCacheTTL          time.Duration // pending selections (120 s)
	SelectionCacheMaxEntries   int           // 4096
	SelectionCacheMaxBytes     int64         // 256 MiB
	ApproximateLRUFallbackWarn bool          // set by Validate when lru falls back to ttl
	// Limits bounds tables and per-request cost (limits.go); zero fields take DefaultLimits.
	Limits Limits
}

// Cost-function policies.
const (
	PolicyDynamo   = "dynamo"
	PolicyKVSelect = "kvselect"
)

// KVSelectDefaults returns Dynamo's defaults with kvselect's own cost function selected: the
// configuration the kvselect binary runs with unless told otherwise.
func KVSelectDefaults() Config {
	c := DefaultConfig()
	c.Policy = PolicyKVSelect
	return c
}

// QueueAging names kvselect's router-queue order beside Dynamo's fcfs, lcfs and wspt: earliest
// deadline first, where a request's deadline is its arrival plus AgingSlowdown times its
// estimated service time (QueueProbe.ServiceMS). See rqueue.go.
const QueueAging = "aging"

// AgingSlowdown is the aging order's slowdown target k: a parked request's deadline is
// arrival + k·service. k = 0 is FCFS, k → ∞ shortest-service-first; k = 1 lets a request be
// overtaken only by work that arrives within one of its own service times after it, so the
// router adds at most about ρ·service (ρ ≤ 1 the fleet's load) to its FCFS wait: a long prompt's
// tail at most doubles its own prefill share of TTFT, while shorter work still goes first
// among requests that arrived close together. It is a principle, not a fit to any trace.
const AgingSlowdown = 1.0

// Tracking-hash algorithm names.
const (
	TrackingPublic = "public-xxh3-v1"
	TrackingKeyed  = "keyed-xxh3-v1"
)

// DefaultPrefillCapacity is the prefill token capacity assumed for a worker that did not
// register max_num_batched_tokens (Dynamo's default).
const DefaultPrefillCapacity = 10_000_000

// DefaultConfig returns Dynamo's defaults.
func DefaultConfig() Config {
	return Config{
		Policy:                   PolicyDynamo,
		PrefillModelA:            4.209989e-07,
		PrefillModelB:            1.518344e-02,
		PrefillModelC:            16.50142,
		AffinityQueueMS:          2000,
		MissWorkWeight:           4,
		ReorderedMissSlowdown:    1,
		EvictionWeight:           1,
		ColdCacheShare:           0.5,
		CacheStickShare:          0.3,
		KVPressureWeight:         1,
		KVOccupancyWeight:        2,
		KVOccupancyMinShare:      0.3,
		DecodeContextWeight:      1e-3,
		ActiveRequestTokens:      256,
		RobustKVSelect:           true,
		LearnContextCost:         true,
		OverlapScoreCredit:       1.0,
		PrefillLoadScale:         1.0,
		HostCacheHitWeight:       0.75,
		DiskCacheHitWeight:       0.25,
		UseKVEvents:              true,
		TrackActiveBlocks:        true,
		AssumeKVReuse:            true,
		TrackPrefillTokens:       true,
		TrackingHash:             TrackingPublic,
		TTL:                      120 * time.Second,
		ApproximateCachePolicy:   "ttl",
		QueuePolicy:              "fcfs",
		EventThreads:             4,
		ActiveRequestExpiry:      300 * time.Second,
		SelectionCacheTTL:        120 * time.Second,
		SelectionCacheMaxEntries: 4096,
		SelectionCacheMaxBytes:   256 << 20,
	}
}

// QueueingEnabled reports whether the router queue (and thus the max_num_batched_tokens
// requirement) is on.
func (c *Config) QueueingEnabled() bool { return c.QueueThreshold != nil || c.PolicyConfig != "" }

// Validate checks the configuration; the error names the offending setting, as in
// "invalid KV router configuration: router_temperature must be ...".
func (c *Config) Validate() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("invalid KV router configuration: "+format, args...)
	}
	if _, ok := policies[c.Policy]; !ok {
		return fail("selection_policy must be %s, got %q", strings.Join(slices.Sorted(maps.Keys(policies)), " or "), c.Policy)
	}
	nonNeg := []struct {
		name string
		v    float64
	}{
		{"overlap_score_credit", c.OverlapScoreCredit},
		{"overlap_score_credit_decay", c.OverlapScoreCreditDecay},
		{"prefill_load_scale", c.PrefillLoadScale},
		{"decode_active_request_weight", c.DecodeActiveRequestWeight},
		{"router_temperature", c.Temperature},
		{"prefill_model_a", c.PrefillModelA},
		{"prefill_model_b", c.PrefillModelB},
		{"prefill_model_c", c.PrefillModelC},
		{"prefill_model_k", c.PrefillModelK},
		{"affinity_weight", c.AffinityWeight},
		{"affinity_queue_ms", c.AffinityQueueMS},
		{"miss_work_weight", c.MissWorkWeight},
		{"reordered_miss_slowdown", c.ReorderedMissSlowdown},
		{"eviction_weight", c.EvictionWeight},
		{"cold_cache_share", c.ColdCacheShare},
		{"eviction_miss_work", c.EvictionMissWork},
		{"kv_pressure_weight", c.KVPressureWeight},
		{"kv_occupancy_weight", c.KVOccupancyWeight},
		{"decode_context_weight", c.DecodeContextWeight},
		{"active_request_tokens", c.ActiveRequestTokens},
	}
	for _, f := range nonNeg {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fail("%s must be a finite, non-negative number (got %v)", f.name, f.v)
		}
	}
	unit := []struct {
		name string
		v    float64
	}{
		{"host_cache_hit_weight", c.HostCacheHitWeight},
		{"disk_cache_hit_weight", c.DiskCacheHitWeight},
		{"shared_cache_multiplier", c.SharedCacheMultiplier},
		{"cache_stick_share", c.CacheStickShare},
		{"kv_occupancy_min_share", c.KVOccupancyMinShare},
	}
	for _, f := range unit {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return fail("%s must be between 0 and 1 (got %v)", f.name, f.v)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.WorkerPrefillModels)) { // the error names the lowest id
		if m := c.WorkerPrefillModels[id]; !m.Valid() {
			return fail("prefill model of worker %d must be finite and non-negative with a positive per-token term", id)
		}
	}
	if c.TrackOutputBlocks && !c.TrackActiveBlocks {
		return fail("router_track_output_blocks requires router_track_active_blocks")
	}
	switch c.TrackingHash {
	case TrackingPublic:
		if c.TrackingKeyFile != "" || c.TrackingKeyID != "" {
			return fail("router tracking key options require router_tracking_hash=%s", TrackingKeyed)
		}
	case TrackingKeyed:
		if c.TrackingKeyFile == "" {
			return fail("router_tracking_key_file is required when router_tracking_hash=%s", TrackingKeyed)
		}
		if c.TrackingKeyID == "" {
			return fail("router_tracking_key_id is required when router_tracking_hash=%s", TrackingKeyed)
		}
	default:
		return fail("router_tracking_hash must be %s or %s, got %q", TrackingPublic, TrackingKeyed, c.TrackingHash)
	}
	if c.TTL < 0 {
		return fail("router_ttl_secs must be non-negative")
	}
	switch c.ApproximateCachePolicy {
	case "ttl":
	case "lru":
		if c.UseKVEvents {
			return fail("router_approximate_cache_policy=lru is not supported with use_kv_events=true")
		}
		// Without events lru falls back to TTL retention; the service warns once.
		c.ApproximateCachePolicy = "ttl"
		c.ApproximateLRUFallbackWarn = true
	default:
		return fail("router_approximate_cache_policy must be ttl or lru, got %q", c.ApproximateCachePolicy)
	}
	if c.QueueThreshold != nil && (math.IsNaN(*c.QueueThreshold) || *c.QueueThreshold < 0) {
		return fail("router_queue_threshold must be non-negative")
	}
	switch c.QueuePolicy {
	case "fcfs", "lcfs", "wspt", QueueAging:
	default:
		return fail("router_queue_policy must be fcfs, lcfs, wspt or aging, got %q", c.QueuePolicy)
	}
	if c.EventThreads < 1 {
		return fail("router_event_threads must be at least 1")
	}
	if c.ActiveRequestExpiry <= 0 {
		return fail("active_request_expiry_secs must be positive")
	}
	for _, t := range []struct {
		name string
		v    *float64
	}{{"conditional_disagg_decode_busy_threshold", c.DecodeBusyThreshold}, {"conditional_disagg_prefill_busy_threshold", c.PrefillBusyThreshold}} {
		if t.v != nil && (math.IsNaN(*t.v) || *t.v < 0) {
			return fail("%s must be non-negative", t.name)
		}
	}
	if c.PredictedTTL != nil {
		if *c.PredictedTTL < 0 {
			return fail("router_predicted_ttl_secs must be non-negative")
		}
		if !c.UseKVEvents {
			return fail("router_predicted_ttl_secs requires use_kv_events=true")
		}
	}
	if c.SessionAffinityTTL < 0 || c.SessionAffinityTTL > 31_536_000*time.Second {
		return fail("session_affinity_ttl_secs must be between 1 and 31536000")
	}
	if err := ParseSessionAffinityMode(c.SessionAffinityMode); err != nil {
		return fail("%v", err)
	}
	if c.SelectionCacheTTL <= 0 {
		return fail("selection_cache_ttl_secs must be positive")
	}
	if c.SelectionCacheMaxEntries < 1 {
		return fail("selection_cache_max_entries must be at least 1")
	}
	if c.SelectionCacheMaxBytes < 1 {
		return fail("selection_cache_max_bytes must be at least 1")
	}
	return nil
}
