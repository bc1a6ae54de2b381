package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

// TestFlagsFollowDynamoRules: the shared flags are refused where Dynamo's CLI refuses them,
// with messages that name the flag.
func TestFlagsFollowDynamoRules(t *testing.T) {
	t.Setenv("DYN_ROUTER_SESSION_AFFINITY_MODE", "")
	bad := []struct {
		want string
		args []string
	}{
		{"--port must be between 1 and 65535", []string{"--port", "0"}},
		{"--port must be between 1 and 65535", []string{"--port", "65536"}},
		{"--replica-sync-port must be between 1 and 65535", []string{"--replica-sync-port", "0"}},
		{"--replica-sync-peers requires --replica-sync-port", []string{"--replica-sync-peers", "tcp://b:9092"}},
		{"invalid replica peer endpoint `tcp://b`: invalid ZMQ endpoint `tcp://b`: missing TCP port", []string{"--replica-sync-port", "9092", "--replica-sync-peers", "tcp://b"}},
		{"session affinity TTL must be between 1 and 31536000 seconds", []string{"--session-affinity-ttl-secs", "0"}},
		{"session affinity TTL must be between 1 and 31536000 seconds", []string{"--session-affinity-ttl-secs", "31536001"}},
		{"must be a whole number of seconds", []string{"--session-affinity-ttl-secs", "1.5"}},
		{"must be a whole number of seconds", []string{"--session-affinity-ttl-secs", "-"}},
		{`invalid session affinity mode "sticky"; expected 'hard' or 'soft'`, []string{"--session-affinity-mode", "sticky"}},
	}
	for _, tc := range bad {
		_, err := configure(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	good := [][]string{
		{"--port", "1"},
		{"--replica-sync-port", "9092", "--replica-sync-peers", "tcp://10.0.0.2:9092,tcp://[::1]:9092"},
		{"--replica-id", "a", "--replica-sync-peers", "b,c"}, // kvselect's bus ids
		{"--session-affinity-ttl-secs", "1"},
		{"--session-affinity-ttl-secs", "31536000"},
	}
	for _, args := range good {
		if _, err := configure(args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestSessionAffinityModeFlagAndEnv: hard by default; DYN_ROUTER_SESSION_AFFINITY_MODE sets the
// default, the flag wins over it, and the mode reaches the engine configuration.
func TestSessionAffinityModeFlagAndEnv(t *testing.T) {
	mode := func(args ...string) string {
		t.Helper()
		o, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		c := core.DefaultConfig()
		o.applyFlags(&c)
		return c.Engine.SessionAffinityMode
	}
	t.Setenv("DYN_ROUTER_SESSION_AFFINITY_MODE", "")
	if got := mode(); got != engine.SessionAffinityHard {
		t.Fatalf("default mode %q, want hard", got)
	}
	t.Setenv("DYN_ROUTER_SESSION_AFFINITY_MODE", "sticky")
	if _, err := parseFlags(nil, io.Discard); err == nil || !strings.HasPrefix(err.Error(), "DYN_ROUTER_SESSION_AFFINITY_MODE: invalid session affinity mode") {
		t.Fatalf("bad env mode: %v", err)
	}
	t.Setenv("DYN_ROUTER_SESSION_AFFINITY_MODE", "soft")
	if got := mode(); got != engine.SessionAffinitySoft {
		t.Fatalf("env mode %q, want soft", got)
	}
	if got := mode("--session-affinity-mode", "hard"); got != engine.SessionAffinityHard {
		t.Fatalf("flag over env: %q, want hard", got)
	}
	o, err := parseFlags([]string{"--session-affinity-ttl-secs", "90"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := core.DefaultConfig()
	o.applyFlags(&c)
	if c.Engine.SessionAffinityTTL != 90*time.Second {
		t.Fatalf("ttl %v", c.Engine.SessionAffinityTTL)
	}
}

// configure parses args into the service configuration as the binary does (flags, then the
// environment and the flags into core.Config, validated).
func configure(args []string) (core.Config, error) {
	o, err := parseFlags(args, io.Discard)
	if err != nil {
		return core.Config{}, err
	}
	return o.config(slog.New(slog.DiscardHandler))
}
