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
// parse are ignored (the default stays; log, when not nil, gets a warning naming the variable,
// so the operator learns why their setting had no effect), while an unknown enum string is an
// error. The router part is validated; callers overlay their flags and call Config.Validate.
func ConfigFromEnv(lookup func(string) (string, bool), log *slog.Logger) (Config, error) {
	cfg := DefaultConfig()
	c := &cfg.Engine
	e := &envReader{lookup: lookup, log: log}
	f64 := func(dst *float64, names ...string) { envRead(e, envNumber, func(x float64) { *dst = x }, names...) }
	optF64 := func(dst **float64, names ...string) { envRead(e, envNumber, func(x float64) { *dst = &x }, names...) }
	boolean := func(dst *bool, names ...string) { envRead(e, envBool, func(b bool) { *dst = b }, names...) }
	secs := func(dst *time.Duration, names ...string) {
		envRead(e, envSecs, func(d time.Duration) { *dst = d }, names...)
	}
	str := func(dst *string, names ...string) { envRead(e, envText, func(v string) { *dst = v }, names...) }

	f64(&c.OverlapScoreCredit, "DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT")
	f64(&c.OverlapScoreCreditDecay, "DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT_DECAY")
	f64(&c.PrefillLoadScale, "DYN_ROUTER_PREFILL_LOAD_SCALE")
	envRead(e, envNumber, func(x float64) { // deprecated alias: sets the prefill scale; 0 also disables the overlap credit
		if c.PrefillLoadScale = x; x == 0 {
			c.OverlapScoreCredit = 0
		}
	}, "DYN_ROUTER_KV_OVERLAP_SCORE_WEIGHT", "DYN_OVERLAP_SCORE_WEIGHT")
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
	envRead(e, envAnySecs, func(d time.Duration) { c.PredictedTTL = &d }, "DYN_ROUTER_PREDICTED_TTL_SECS")
	envRead(e, envInt, func(n int) { c.EventThreads = n }, "DYN_ROUTER_EVENT_THREADS")
	envRead(e, envInt, func(n int) { c.MinInitialWorkers = n }, "DYN_ROUTER_MIN_INITIAL_WORKERS")
	f64(&c.SharedCacheMultiplier, "DYN_SHARED_CACHE_MULTIPLIER")
	if v, ok := e.get("DYN_SHARED_CACHE_TYPE"); ok && !strings.EqualFold(v, "none") {
		if _, set := e.get("DYN_SHARED_CACHE_MULTIPLIER"); !set {
			c.SharedCacheMultiplier = 0.5
		}
	}
	if v, ok := e.get("DYN_ROUTER_PREFILL_LOAD_MODEL"); ok && v != "none" && v != "aic" {
		return cfg, fmt.Errorf("invalid KV router configuration: router_prefill_load_model must be none or aic, got %q", v)
	}
	return cfg, c.Validate()
}

// envReader reads DYN_ROUTER_* variables; name is the variable get found last, so that a
// warning names the one actually read.
type envReader struct {
	lookup func(string) (string, bool)
	log    *slog.Logger
	name   string
}

// get returns the trimmed value of the first of names that is set and not blank.
func (e *envReader) get(names ...string) (string, bool) {
	for _, n := range names {
		if v, ok := e.lookup(n); ok && strings.TrimSpace(v) != "" {
			e.name = n
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// envParser parses one kind of value; want says what a value that does not parse should be.
type envParser[T any] struct {
	want  string
	parse func(string) (T, bool)
}

var (
	envText    = envParser[string]{"", func(v string) (string, bool) { return v, true }}
	envBool    = envParser[bool]{"a boolean (1/true/yes/on or 0/false/no/off)", truthy}
	envNumber  = envParser[float64]{"a number", func(v string) (float64, bool) { x, err := strconv.ParseFloat(v, 64); return x, err == nil }}
	envInt     = envParser[int]{"an integer", func(v string) (int, bool) { n, err := strconv.Atoi(v); return n, err == nil }}
	envSecs    = envParser[time.Duration]{"a non-negative number of seconds", func(v string) (time.Duration, bool) { return parseSecs(v, false) }}
	envAnySecs = envParser[time.Duration]{"a number of seconds", func(v string) (time.Duration, bool) { return parseSecs(v, true) }}
)

// parseSecs parses a number of seconds (negative only when allowed).
func parseSecs(v string, negative bool) (time.Duration, bool) {
	x, err := strconv.ParseFloat(v, 64)
	return time.Duration(x * float64(time.Second)), err == nil && (negative || x >= 0)
}

// envRead parses the first set variable of names with p and hands the value to set; a value that
// does not parse is ignored with a warning (Dynamo's behaviour: the default stays).
func envRead[T any](e *envReader, p envParser[T], set func(T), names ...string) {
	v, ok := e.get(names...)
	if !ok {
		return
	}
	if x, ok := p.parse(v); ok {
		set(x)
	} else if e.log != nil {
		e.log.Warn("ignoring unparsable environment variable; the default stays", "variable", e.name, "value", v, "expected", p.want)
	}
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
