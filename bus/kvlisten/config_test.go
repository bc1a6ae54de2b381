package kvlisten

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestValidateEndpoint follows Dynamo's endpoint rules and messages.
func TestValidateEndpoint(t *testing.T) {
	cases := []struct {
		ep  string
		err string // substring; empty = valid
	}{
		{"tcp://127.0.0.1:5557", ""},
		{"tcp://*:5557", ""},
		{"tcp://worker-0.svc:5557", ""},
		{"tcp://[::1]:5557", ""},
		{"ipc:///tmp/kv.sock", ""},
		{"inproc://kv", ""},
		{"127.0.0.1:5557", "missing scheme"},
		{"://x", "missing scheme"},
		{"tcp://", "missing address"},
		{"tcp://host", "missing TCP port"},
		{"tcp://:5557", "missing TCP host"},
		{"tcp://[::1:5557", "missing closing ]"},
		{"tcp://[zz]:5557", "invalid IPv6 host"},
		{"tcp://::1:5557", "missing TCP port"},
		{"tcp://host:70000", "invalid TCP port"},
		{"tcp://host:-1", "invalid TCP port"},
		{"udp://host:1", "unsupported scheme `udp`"},
	}
	for _, tc := range cases {
		t.Run(tc.ep, func(t *testing.T) {
			err := ValidateEndpoint(tc.ep)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidEndpoint) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want ErrInvalidEndpoint containing %q", err, tc.err)
			}
		})
	}
}

// TestStartRejectsBadConfig proves Start refuses configs it cannot run, with ErrInvalidConfig.
func TestStartRejectsBadConfig(t *testing.T) {
	h := &recHandler{}
	cases := []struct {
		name string
		cfg  Config
	}{
		{"no_handler", Config{Endpoint: "tcp://127.0.0.1:1"}},
		{"no_endpoint", Config{Handler: h}},
		{"bad_endpoint", Config{Endpoint: "tcp://x", Handler: h}},
		{"bad_replay", Config{Endpoint: "tcp://127.0.0.1:1", ReplayEndpoint: "nope", Handler: h}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Start(context.Background(), tc.cfg)
			if err == nil {
				_ = l.Close()
				t.Fatal("Start accepted a bad config")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

// TestDefaults proves zero fields get the documented defaults.
func TestDefaults(t *testing.T) {
	c, err := Config{Endpoint: "tcp://127.0.0.1:1", Handler: &recHandler{}, MinBackoff: time.Second, MaxBackoff: time.Millisecond}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxBackoff != time.Second || c.DialTimeout != DefaultDialTimeout || c.ReplayTimeout != DefaultReplayTimeout ||
		c.RestartWindow != DefaultRestartWindow || c.BufferBatches != DefaultBufferBatches ||
		c.BufferBytes != DefaultBufferBytes || c.QueueLen != DefaultQueueLen || c.Logger == nil {
		t.Fatalf("defaults not applied: %+v", c)
	}
	c, _ = Config{Endpoint: "tcp://127.0.0.1:1", Handler: &recHandler{}}.withDefaults()
	if c.MinBackoff != DefaultMinBackoff || c.MaxBackoff != DefaultMaxBackoff {
		t.Fatalf("backoff defaults: %v %v", c.MinBackoff, c.MaxBackoff)
	}
}

// TestStatusString pins the names used in logs and the HTTP API.
func TestStatusString(t *testing.T) {
	for s, want := range map[Status]string{StatusPending: "pending", StatusActive: "active", StatusFailed: "failed", StatusClosed: "closed", Status(99): "unknown"} {
		if s.String() != want {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), want)
		}
	}
}

// TestDialEndpoint pins the mapping onto the private transport schemes.
func TestDialEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"tcp://127.0.0.1:5": "kvlisten-tcp://127.0.0.1:5",
		"ipc:///tmp/a":      "kvlisten-ipc:///tmp/a",
		"inproc://x":        "inproc://x",
		"tcp://[::1]:5557":  "kvlisten-tcp://[::1]:5557",
	} {
		if got := dialEndpoint(in); got != want {
			t.Errorf("dialEndpoint(%q) = %q, want %q", in, got, want)
		}
	}
}
