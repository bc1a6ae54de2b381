package engine

// Validation tests: Config.Validate (every rule names its setting), ValidateZMQEndpoint (every
// message of spec §10.7), and the request-level validators (router_config_override,
// session_context, affinity_target, pinned_worker).

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestConfigValidate: each broken setting is refused with a message naming it; the defaults
// pass.
func TestConfigValidate(t *testing.T) {
	d := DefaultConfig()
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	neg := ptr(-1.0)
	// One row per rule of Config.Validate; want is the setting's DYN_ROUTER_/CLI name, which the
	// message must contain so an operator knows what to fix.
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		// Non-negative finite weights.
		{"credit negative", func(c *Config) { c.OverlapScoreCredit = -1 }, "overlap_score_credit must be a finite, non-negative number"},
		{"credit infinite", func(c *Config) { c.OverlapScoreCredit = math.Inf(1) }, "overlap_score_credit must be a finite"},
		{"decay NaN", func(c *Config) { c.OverlapScoreCreditDecay = math.NaN() }, "overlap_score_credit_decay"},
		{"prefill scale", func(c *Config) { c.PrefillLoadScale = -0.5 }, "prefill_load_scale"},
		{"request weight", func(c *Config) { c.DecodeActiveRequestWeight = -2 }, "decode_active_request_weight"},
		{"temperature", func(c *Config) { c.Temperature = -0.1 }, "router_temperature"},
		// Weights in [0, 1].
		{"host weight above 1", func(c *Config) { c.HostCacheHitWeight = 1.5 }, "host_cache_hit_weight must be between 0 and 1"},
		{"disk weight negative", func(c *Config) { c.DiskCacheHitWeight = -0.1 }, "disk_cache_hit_weight"},
		{"shared multiplier NaN", func(c *Config) { c.SharedCacheMultiplier = math.NaN() }, "shared_cache_multiplier"},
		{"output blocks need active blocks", func(c *Config) { c.TrackOutputBlocks, c.TrackActiveBlocks = true, false }, "router_track_output_blocks requires router_track_active_blocks"},
		// Tracking-hash options (spec §4.4).
		{"key options in public mode", func(c *Config) { c.TrackingKeyID = "k" }, "router tracking key options require router_tracking_hash=keyed-xxh3-v1"},
		{"keyed without file", func(c *Config) { c.TrackingHash = TrackingKeyed; c.TrackingKeyID = "k" }, "router_tracking_key_file is required"},
		{"keyed without id", func(c *Config) { c.TrackingHash = TrackingKeyed; c.TrackingKeyFile = "/k" }, "router_tracking_key_id is required"},
		{"unknown tracking hash", func(c *Config) { c.TrackingHash = "md5" }, `router_tracking_hash must be public-xxh3-v1 or keyed-xxh3-v1, got "md5"`},
		// Approximate index and queueing.
		{"ttl negative", func(c *Config) { c.TTL = -time.Second }, "router_ttl_secs"},
		{"lru with events", func(c *Config) { c.ApproximateCachePolicy = "lru" }, "router_approximate_cache_policy=lru is not supported with use_kv_events=true"},
		{"unknown cache policy", func(c *Config) { c.ApproximateCachePolicy = "fifo" }, "router_approximate_cache_policy must be ttl or lru"},
		{"queue threshold", func(c *Config) { c.QueueThreshold = neg }, "router_queue_threshold"},
		{"queue policy", func(c *Config) { c.QueuePolicy = "random" }, "router_queue_policy must be fcfs, lcfs, wspt or aging"},
		{"event threads", func(c *Config) { c.EventThreads = 0 }, "router_event_threads"},
		{"expiry", func(c *Config) { c.ActiveRequestExpiry = 0 }, "active_request_expiry_secs"},
		// Conditional-disaggregation thresholds, predicted TTL, session affinity, selection cache.
		{"decode busy threshold", func(c *Config) { c.DecodeBusyThreshold = neg }, "conditional_disagg_decode_busy_threshold"},
		{"prefill busy threshold", func(c *Config) { c.PrefillBusyThreshold = ptr(math.NaN()) }, "conditional_disagg_prefill_busy_threshold"},
		{"predicted ttl negative", func(c *Config) { c.PredictedTTL = ptr(-time.Second) }, "router_predicted_ttl_secs must be non-negative"},
		{"predicted ttl without events", func(c *Config) { c.PredictedTTL = ptr(time.Second); c.UseKVEvents = false }, "router_predicted_ttl_secs requires use_kv_events=true"},
		{"affinity ttl too long", func(c *Config) { c.SessionAffinityTTL = 31_536_001 * time.Second }, "session_affinity_ttl_secs"},
		{"selection cache ttl", func(c *Config) { c.SelectionCacheTTL = 0 }, "selection_cache_ttl_secs"},
		{"selection cache entries", func(c *Config) { c.SelectionCacheMaxEntries = 0 }, "selection_cache_max_entries"},
		{"selection cache bytes", func(c *Config) { c.SelectionCacheMaxBytes = 0 }, "selection_cache_max_bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), "invalid KV router configuration: ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want a message containing %q", err, tc.want)
			}
			if _, err := New(c, Options{}); err == nil {
				t.Fatalf("New accepted an invalid configuration")
			}
		})
	}
}

// TestConfigLRUFallback: lru without KV events falls back to ttl and flags the warning.
func TestConfigLRUFallback(t *testing.T) {
	c := DefaultConfig()
	c.UseKVEvents = false
	c.ApproximateCachePolicy = "lru"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ApproximateCachePolicy != "ttl" || !c.ApproximateLRUFallbackWarn {
		t.Fatalf("policy %q warn %v, want ttl/true", c.ApproximateCachePolicy, c.ApproximateLRUFallbackWarn)
	}
}

// TestNewKeyedMode: keyed tracking needs a 32-byte key; with one, token prompts get keyed
// tracking hashes while index lookups keep the public block hashes (spec §4.4 test vector).
func TestNewKeyedMode(t *testing.T) {
	c := DefaultConfig()
	c.TrackingHash, c.TrackingKeyFile, c.TrackingKeyID = TrackingKeyed, "/key", "2026-01"
	if _, err := New(c, Options{TrackingKey: []byte("short")}); err == nil {
		t.Fatalf("New accepted a 5-byte key")
	}
	key := []byte(strings.Repeat("\x5a", 32))
	e, err := New(c, Options{TrackingKey: key, Rand: rand.New(rand.NewPCG(1, 1))})
	noErr(t, err)
	mustUpsert(t, e, spec(1, inModel("model-a", "tenant-a")))
	resp, err := e.SelectAndReserve(&SelectRequest{
		ModelName: ptr("model-a"), RoutingGroup: ptr("tenant-a"),
		Prompt: Prompt{TokenIDs: toks(0, 12), CacheSalt: ptr("cache-a"), LoraName: ptr("adapter-a")},
	}, t0)
	noErr(t, err)
	want := []uint64{4363769719052127296, 14998523962162619427, 13920914207884994756}
	for i, h := range resp.SequenceHashes {
		if uint64(h) != want[i] {
			t.Fatalf("keyed tracking hash %d = %d, want %d", i, uint64(h), want[i])
		}
	}
}

// TestValidateZMQEndpoint covers every message of spec §10.7.
func TestValidateZMQEndpoint(t *testing.T) {
	// want is the reason after "invalid ZMQ endpoint `<ep>`: " ("" = valid). The port errors
	// reproduce Rust's u16 parser wording, which Dynamo clients see.
	tests := []struct{ ep, want string }{
		{"tcp://127.0.0.1:5557", ""},
		{"tcp://*:9092", ""},
		{"tcp://[::1]:5557", ""},
		{"tcp://worker-0.svc:0", ""},
		{"ipc:///tmp/kv.sock", ""},
		{"inproc://events", ""},
		{"", "missing scheme"},
		{"worker:5557", "missing scheme"},
		{"://worker:5557", "missing scheme"},
		{"tcp://", "missing address"},
		{"ipc://", "missing address"},
		{"udp://a:1", "unsupported scheme `udp`"},
		{"TCP://a:1", "unsupported scheme `TCP`"},
		{"tcp://worker", "missing TCP port"},
		{"tcp://:5557", "missing TCP host"},
		{"tcp://[::1:5557", "missing closing ]"},
		{"tcp://::1:5557", "missing TCP port"},
		{"tcp://a:", "invalid TCP port: cannot parse integer from empty string"},
		{"tcp://a:x1", "invalid TCP port: invalid digit found in string"},
		{"tcp://a:-1", "invalid TCP port: invalid digit found in string"},
		{"tcp://a:65536", "invalid TCP port: number too large to fit in target type"},
	}
	for _, tc := range tests {
		err := ValidateZMQEndpoint(tc.ep)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: unexpected error %v", tc.ep, err)
		case tc.want != "" && err == nil:
			t.Errorf("%q: accepted, want %q", tc.ep, tc.want)
		case tc.want != "" && err.Error() != "invalid ZMQ endpoint `"+tc.ep+"`: "+tc.want:
			t.Errorf("%q: got %q, want reason %q", tc.ep, err, tc.want)
		}
	}
}

// TestRequestValidation covers the 422 checks of SelectRequest and router_config_override.
func TestRequestValidation(t *testing.T) {
	// Every row is a 422 in Dynamo (serde rejects it while deserialising); a refused request must
	// change nothing: no booking effects, no pending selection.
	nan, neg := math.NaN(), -1.0
	tests := []struct {
		name string
		req  SelectRequest
		want string
	}{
		{"credit NaN", SelectRequest{RouterConfigOverride: &ConfigOverride{OverlapScoreCredit: &nan}}, "overlap_score_credit must be a finite, non-negative number"},
		{"scale negative", SelectRequest{RouterConfigOverride: &ConfigOverride{PrefillLoadScale: &neg}}, "prefill_load_scale must be greater than or equal to 0"},
		{"weight negative", SelectRequest{RouterConfigOverride: &ConfigOverride{OverlapScoreWeight: &neg}}, "overlap_score_weight must be greater than or equal to 0"},
		{"temperature infinite", SelectRequest{RouterConfigOverride: &ConfigOverride{RouterTemperature: ptr(math.Inf(1))}}, "router_temperature must be greater than or equal to 0"},
		{"shared above 1", SelectRequest{RouterConfigOverride: &ConfigOverride{SharedCacheMultiplier: ptr(1.01)}}, "shared_cache_multiplier must be between 0 and 1"},
		{"shared NaN", SelectRequest{RouterConfigOverride: &ConfigOverride{SharedCacheMultiplier: &nan}}, "shared_cache_multiplier"},
		{"session_context without id", SelectRequest{SessionContext: &SessionContext{}}, "session_context: missing field `session_id`"},
		{"unknown input_trigger", SelectRequest{SessionContext: &SessionContext{SessionID: ptr("s"), InputTrigger: ptr("cron")}}, "unknown variant `cron`"},
		{"affinity without worker", SelectRequest{AffinityTarget: &AffinityTarget{DPRank: ptr(uint32(0))}}, "affinity_target: missing field `worker_id`"},
		{"pin without worker", SelectRequest{PinnedWorker: &PinnedWorker{DPRank: ptr(uint32(0))}}, "pinned_worker: missing field `worker_id`"},
		{"pin without rank", SelectRequest{PinnedWorker: &PinnedWorker{WorkerID: ptr(uint64(1))}}, "pinned_worker: missing field `dp_rank`"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, nil)
			mustUpsert(t, e, spec(1))
			req := tc.req
			req.Prompt = tokenPrompt(toks(0, 8))
			_, err := e.Select(&req, t0)
			wantErr(t, err, ErrUnprocessable, tc.want)
			_, err = e.SelectAndReserve(&req, t0)
			wantErr(t, err, ErrUnprocessable, tc.want)
			if len(e.TakeEffects(nil)) != 0 || e.PendingSelections() != 0 {
				t.Fatalf("a refused request changed state")
			}
		})
	}
	valid := SelectRequest{SessionContext: &SessionContext{SessionID: ptr("s"), InputTrigger: ptr("tool_result")},
		RouterConfigOverride: &ConfigOverride{SharedCacheMultiplier: ptr(1.0), RouterTemperature: ptr(0.0)}}
	if err := valid.Validate(); err != nil {
		t.Fatalf("valid request refused: %v", err)
	}
	if valid.sessionID() != "s" {
		t.Fatalf("session_context.session_id must win")
	}
}

// TestErrorType: engine errors expose their sentinel through errors.Is and their message
// verbatim.
func TestErrorType(t *testing.T) {
	err := error(notFound("reservation %s not found", "x"))
	var ee *Error
	if !errors.As(err, &ee) || ee.Kind != ErrNotFound || err.Error() != "reservation x not found" {
		t.Fatalf("error %#v", err)
	}
}

// TestValidatePolicyNames: selection_policy accepts every registered policy and the rejection
// lists them, as it always has ("dynamo or kvselect").
func TestValidatePolicyNames(t *testing.T) {
	for name := range policies {
		c := DefaultConfig()
		c.Policy = name
		if err := c.Validate(); err != nil {
			t.Fatalf("policy %q: %v", name, err)
		}
	}
	c := DefaultConfig()
	c.Policy = "x"
	want := `invalid KV router configuration: selection_policy must be dynamo or kvselect, got "x"`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}
