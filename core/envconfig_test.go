package core

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
)

func envLookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// Unparsable DYN_ROUTER_* values keep Dynamo's behaviour (ignored, the default stays) but each
// is logged as a warning naming the variable, so a typo does not go unnoticed.
func TestConfigFromEnvWarnsOnUnparsable(t *testing.T) {
	env := map[string]string{
		"DYN_ROUTER_USE_KV_EVENTS":           "maybe",
		"DYN_ROUTER_QUEUE_THRESHOLD":         "lots",
		"DYN_ROUTER_TTL_SECS":                "-5",
		"DYN_ROUTER_TEMPERATURE":             "0.5", // valid: no warning
		"DYN_ROUTER_MIN_INITIAL_WORKERS":     "two",
		"DYN_ROUTER_TRACK_OUTPUT_BLOCKS":     "on", // valid
		"DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT": "",   // empty is unset, not a warning
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	cfg, err := ConfigFromEnv(envLookup(env), log)
	c := cfg.Engine
	if err != nil {
		t.Fatal(err)
	}
	def := engine.DefaultConfig()
	if c.UseKVEvents != def.UseKVEvents || c.TTL != def.TTL || (c.QueueThreshold == nil) != (def.QueueThreshold == nil) ||
		c.MinInitialWorkers != def.MinInitialWorkers {
		t.Fatalf("unparsable values changed the config: %+v", c)
	}
	if c.Temperature != 0.5 || !c.TrackOutputBlocks {
		t.Fatalf("valid values not applied: temperature %v track_output_blocks %v", c.Temperature, c.TrackOutputBlocks)
	}
	out := buf.String()
	for _, name := range []string{"DYN_ROUTER_USE_KV_EVENTS", "DYN_ROUTER_QUEUE_THRESHOLD", "DYN_ROUTER_TTL_SECS", "DYN_ROUTER_MIN_INITIAL_WORKERS"} {
		if !strings.Contains(out, "variable="+name+" ") || !strings.Contains(out, "level=WARN") {
			t.Errorf("no warning naming %s in:\n%s", name, out)
		}
	}
	for _, name := range []string{"DYN_ROUTER_TEMPERATURE", "DYN_ROUTER_TRACK_OUTPUT_BLOCKS", "DYN_ROUTER_KV_OVERLAP_SCORE_CREDIT"} {
		if strings.Contains(out, name) {
			t.Errorf("warning for valid or empty %s:\n%s", name, out)
		}
	}
	if n := strings.Count(out, "level=WARN"); n != 4 {
		t.Errorf("%d warnings, want 4:\n%s", n, out)
	}
	// A deprecated alias is named as set.
	buf.Reset()
	if _, err := ConfigFromEnv(envLookup(map[string]string{"DYN_USE_KV_EVENTS": "perhaps"}), log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "variable=DYN_USE_KV_EVENTS ") {
		t.Errorf("alias not named:\n%s", buf.String())
	}
}

// An embedder that builds its configuration from the environment gets the session affinity mode
// too (not only the kvselect binary's flag default), and an unknown mode is an error as Dynamo's
// unknown enum strings are.
func TestConfigFromEnvSessionAffinityMode(t *testing.T) {
	cfg, err := ConfigFromEnv(envLookup(map[string]string{"DYN_ROUTER_SESSION_AFFINITY_MODE": "soft"}), nil)
	c := cfg.Engine
	if err != nil {
		t.Fatal(err)
	}
	if c.SessionAffinityMode != engine.SessionAffinitySoft {
		t.Fatalf("mode %q, want soft", c.SessionAffinityMode)
	}
	if _, err := ConfigFromEnv(envLookup(map[string]string{"DYN_ROUTER_SESSION_AFFINITY_MODE": "sticky"}), nil); err == nil {
		t.Fatal("an unknown session affinity mode was accepted")
	}
}
