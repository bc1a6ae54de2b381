package core

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// ConfigFromEnv builds the service configuration from DefaultConfig and Dynamo's DYN_ROUTER_*
// environment variables (spec §13.2), which set the router part (Config.Engine). lookup is
// os.LookupEnv in production and a map in tests. As in Dynamo, numbers and booleans that do not
// parse are ignored (the default stays), while an unknown enum string is an error. The router
// part is validated; callers overlay their flags and call Config.Validate.
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, error) {
	return ConfigFromEnvLogged(lookup, nil)
}

// ConfigFromEnvLogged is ConfigFromEnv that also logs a warning naming each variable whose value
// is ignored because it does not parse (Dynamo's behaviour is kept: the default stays, but the
// operator learns why their setting had no effect). log may be nil (no warnings).
func ConfigFromEnvLogged(lookup func(string) (string, bool), log *slog.Logger) (Config, error) {
	cfg := DefaultConfig()
	c := &cfg.Engine
	// name is the variable get found last, so that a warning names the one actually read.
	var name string
	get := func(names ...string) (string, bool) {
		for _, n := range names {
			if v, ok := lookup(n); ok && strings.TrimSpace(v) != "" {
				name = n
				return strings.TrimSpace(v), true
			}
		}
		return "", false
	}
	ignored := func(v, want string) {
		if log != nil {
			log.Warn("ignoring unparsable environment variable; the default stays", "variable", name, "value", v, "expected", want)
		}
	}
	f64 := func(dst *float64, names ...string) {
		if v, ok := get(names...); ok {
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				*dst = x
			} else {
				ignored(v, "a number")
			}
		}
	}
	optF64 := func(dst **float64, names ...string) {
		if v, ok := get(names...); ok {
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				*dst = &x
			} else {
				ignored(v, "a number")
			}
		}
	}
	boolean := func(dst *bool, names ...string) {
		if v, ok := get(names...); ok {
			if b, ok := truthy(v); ok {
				*dst = b
			} else {
				ignored(v, "a boolean (1/true/yes/on or 0/false/no/off)")
			}
		}
	}
	secs := func(dst *time.Duration, names ...string) {
		if v, ok := get(names...); ok {
			if x, err := strconv.ParseFloat(v, 64); err == nil && x >= 0 {
				*dst = time.Duration(x * float64(time.Second))
			} else {
				ignored(v, "a non-negative number of seconds")
			}
		}
	}
	str := func(dst *string, names ...string) {
		if v, ok := get(names...); ok {
			*dst = v
		}
	}

	f64(&c.OverlapScoreCredit, "DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT")
	f64(&c.OverlapScoreCreditDecay, "DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT_DECAY")
	f64(&c.PrefillLoadScale, "DYN_ROUTER_PREFILL_LOAD_SCALE")
	if v, ok := get("DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT", "DYN_OVERLAP_SCORE_WEIGHT"); ok {
		// Deprecated alias: sets the prefill scale; 0 also disables the overlap credit.
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			c.PrefillLoadScale = x
			if x == 0 {
				c.OverlapScoreCredit = 0
			}
		} else {
			ignored(v, "a number")
		}
	}
	f64(&c.DecodeActiveRequestWeight, "DYN_ROUTER_DECODE_ACTIVE_REQUEST_WEIGHT")
	f64(&c.Temperature, "DYN_ROUTER_TEMPERATURE")
	f64(&c.HostCacheHitWeight, "DYN_ROUTER_HOST_CACHE_HIT_WEIGHT")
	f64(&c.DiskCacheHitWeight, "DYN_ROUTER_DISK_CACHE_HIT_WEIGHT")
	boolean(&c.UseKVEvents, "DYN_ROUTER_USE_KV_EVENTS", "DYN_USE_KV_EVENTS")
	boolean(&c.TrackActiveBlocks, "DYN_ROUTER_TRACK_ACTIVE_BLOCKS")
	boolean(&c.TrackOutputBlocks, "DYN_ROUTER_TRACK_OUTPUT_BLOCKS")
	boolean(&c.AssumeKVReuse, "DYN_ROUTER_ASSUME_KV_REUSE")
	boolean(&c.TrackPrefillTokens, "DYN_ROUTER_TRACK_PREFILL_TOKENS")
	str(&c.TrackingHash, "DYN_ROUTER_TRACKING_HASH")
	str(&c.TrackingKeyFile, "DYN_ROUTER_TRACKING_KEY_FILE")
	str(&c.TrackingKeyID, "DYN_ROUTER_TRACKING_KEY_ID")
	optF64(&c.QueueThreshold, "DYN_ROUTER_QUEUE_THRESHOLD")
	str(&c.PolicyConfig, "DYN_ROUTER_POLICY_CONFIG")
	str(&c.QueuePolicy, "DYN_ROUTER_QUEUE_POLICY")
	str(&c.ApproximateCachePolicy, "DYN_ROUTER_APPROXIMATE_CACHE_POLICY")
	str(&c.SessionAffinityMode, "DYN_ROUTER_SESSION_AFFINITY_MODE")
	secs(&c.TTL, "DYN_ROUTER_TTL_SECS")
	secs(&c.ActiveRequestExpiry, "DYN_ROUTER_ACTIVE_REQUEST_EXPIRY_SECS")
	optF64(&c.DecodeBusyThreshold, "DYN_ROUTER_CONDITIONAL_DISAGG_DECODE_BUSY_THRESHOLD")
	optF64(&c.PrefillBusyThreshold, "DYN_ROUTER_CONDITIONAL_DISAGG_PREFILL_BUSY_THRESHOLD")
	if v, ok := get("DYN_ROUTER_PREDICTED_TTL_SECS"); ok {
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			d := time.Duration(x * float64(time.Second))
			c.PredictedTTL = &d
		} else {
			ignored(v, "a number of seconds")
		}
	}
	if v, ok := get("DYN_ROUTER_EVENT_THREADS"); ok {
		if n, err := strconv.Atoi(v); err == nil {
			c.EventThreads = n
		} else {
			ignored(v, "an integer")
		}
	}
	if v, ok := get("DYN_ROUTER_MIN_INITIAL_WORKERS"); ok {
		if n, err := strconv.Atoi(v); err == nil {
			c.MinInitialWorkers = n
		} else {
			ignored(v, "an integer")
		}
	}
	f64(&c.SharedCacheMultiplier, "DYN_SHARED_CACHE_MULTIPLIER")
	if v, ok := get("DYN_SHARED_CACHE_TYPE"); ok && !strings.EqualFold(v, "none") {
		if _, set := get("DYN_SHARED_CACHE_MULTIPLIER"); !set {
			c.SharedCacheMultiplier = 0.5
		}
	}
	if v, ok := get("DYN_ROUTER_PREFILL_LOAD_MODEL"); ok && v != "none" && v != "aic" {
		return cfg, fmt.Errorf("invalid KV router configuration: router_prefill_load_model must be none or aic, got %q", v)
	}
	return cfg, c.Validate()
}

// truthy parses Dynamo's boolean spellings; anything else is "unset".
func truthy(v string) (value, ok bool) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, true
	case "0", "false", "no", "off":
		return false, true
	}
	return false, false
}
