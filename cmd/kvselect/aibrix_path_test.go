package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

// An --aibrix-path that collides with a Dynamo route used to panic while the route table was
// built, and one with a :name or * segment silently became a wildcard; both are refused by
// aibrixHandler with an error naming the flag, before any route is registered.
func TestAIBrixPathRefused(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = false
	svc, err := core.New(core.Config{Engine: cfg, ReplicaID: "r", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	for _, p := range []string{
		"/select", "/workers", "/workers/extra", "/ready", "/reservations/x/prefill_complete", "/metrics",
		"/v1/:model", "/v1/*rest", "/v1alpha1/sel:ect", "select", "/v1alpha1/select/", "/v1//select",
		"/v1/a b", "/v1/%2F",
	} {
		_, err := aibrixHandler(&options{aibrixPath: p}, svc, slog.New(slog.DiscardHandler))
		if err == nil {
			t.Errorf("--aibrix-path %q accepted", p)
			continue
		}
		if !strings.Contains(err.Error(), "--aibrix-path") {
			t.Errorf("--aibrix-path %q: error %q does not name the flag", p, err)
		}
	}
	for _, p := range []string{"/v1alpha1/select", "/v1alpha1/route", "/aibrix/v1/decide", "/selector"} {
		if _, err := aibrixHandler(&options{aibrixPath: p}, svc, slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("--aibrix-path %q refused: %v", p, err)
		}
	}
}
