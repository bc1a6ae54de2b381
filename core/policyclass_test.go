package core

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/internal/poll"
)

// policyFixture is queueService with a policy-class file instead of router_queue_threshold.
func policyFixture(t *testing.T, yamlText string) *Service {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(yamlText), 0o600); err != nil {
		t.Fatal(err)
	}
	return queueService(t, func(c *engine.Config) { c.PolicyConfig = path })
}

// TestPolicyClassesOverTheService: classes bring their own busy rule (an absolute token
// threshold here), a class without thresholds never waits, and a class's queue limit answers
// 429 with Dynamo's message and details.
func TestPolicyClassesOverTheService(t *testing.T) {
	svc := policyFixture(t, `
default_policy_family: f
uncached_isl_buckets: [{min_tokens: 0, bucket: s}]
policy_classes:
  - {name: fs, policy_family: f, cache_bucket: s, quantum: 8, prefill_busy_threshold: 50, request_queue_limit_per_worker: 1}
  - {name: free, quantum: 1}
`)
	if _, err := svc.SelectAndReserve(selReq("big", 0, 60)); err != nil { // 60 > 50: busy for fs
		t.Fatal(err)
	}
	// The class without thresholds is never held back.
	free := selReq("free", 100, 8)
	free.PolicyClass = "free"
	if _, err := svc.SelectAndReserveWait(t.Context(), free); err != nil {
		t.Fatalf("class without thresholds: %v", err)
	}
	// fs waits; its limit is 1 request × 1 worker, so a second one is refused.
	out := make(chan outcome, 1)
	wait(t.Context(), svc, selReq("w1", 200, 8), true, out)
	poll.True(t, queueWait, "w1 parked", pendingIs(svc, 1))
	if st := svc.Stats().Queue; st.ByClass["fs"] != 1 || len(st.ByClass) != 1 {
		t.Fatalf("per-class pending %v, want fs: 1", st.ByClass)
	}
	_, err := svc.SelectAndReserveWait(t.Context(), selReq("w2", 300, 8))
	var ee *engine.Error
	if !errors.As(err, &ee) || !errors.Is(err, engine.ErrOverloaded) ||
		ee.Msg != `router policy class "fs" queue requests limit reached (current=1, limit=1)` ||
		ee.Details != (engine.QueueRejection{PolicyClass: "fs", LimitKind: "requests", Current: 1, Limit: 1}) {
		t.Fatalf("over the limit: %#v", err)
	}
	// The immediate API applies the class rule too: busy → 429.
	if _, err := svc.SelectAndReserve(selReq("now", 400, 8)); !errors.Is(err, engine.ErrOverloaded) {
		t.Fatalf("immediate select_and_reserve: %v", err)
	}
	if err := svc.PrefillComplete("big"); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, out); o.id != "w1" || o.err != nil {
		t.Fatalf("w1: %+v", o)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := svc.SelectAndReserveWait(ctx, selReq("after", 500, 8)); err != nil {
		t.Fatalf("with room again a request is served at once: %v", err)
	}
}

func TestLoadPoliciesErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("policy_classes: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.yaml"): "failed to read router policy config",
		bad:                                "failed to parse router policy config " + bad,
	} {
		cfg := engine.DefaultConfig()
		cfg.PolicyConfig = path
		if _, err := New(Config{Engine: cfg, Seed: 1}); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %v, want %q", path, err, want)
		}
	}
}

// TestPolicyClassesWithoutThresholdNeedNoBatchedTokens: queueing is per model profile (Dynamo's
// queueing_enabled(model)). Classes that set no busy threshold never park a request, so a worker
// registered without max_num_batched_tokens is schedulable; a profile with a thresholded class
// still requires it, for that model only.
func TestPolicyClassesWithoutThresholdNeedNoBatchedTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(`
default_policy_family: f
uncached_isl_buckets: [{min_tokens: 0, bucket: s}]
policy_classes:
  - {name: fs, policy_family: f, cache_bucket: s, quantum: 8}
  - {name: vip, quantum: 1}
models:
  gated:
    default_policy_family: g
    uncached_isl_buckets: [{min_tokens: 0, bucket: s}]
    policy_classes:
      - {name: gs, policy_family: g, cache_bucket: s, quantum: 8, prefill_busy_threshold: 50}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := engine.KVSelectDefaults()
	cfg.UseKVEvents = false
	cfg.PolicyConfig = path
	svc, err := New(Config{Engine: cfg, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	for _, tc := range []struct {
		id    uint64
		model string
		want  string // lifecycle
	}{{1, "plain", "schedulable"}, {2, "gated", "incomplete"}} {
		rec, err := svc.UpsertWorker(WorkerSpec{WorkerID: ptr(tc.id), ModelName: ptr(tc.model), Endpoint: ptr("http://w"), BlockSize: ptr(uint32(4))})
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Lifecycle) != tc.want {
			t.Fatalf("worker %d of model %s: lifecycle %s (%v), want %s", tc.id, tc.model, rec.Lifecycle, rec.NotSchedulableReasons, tc.want)
		}
	}
	req := selReq("r", 0, 8)
	req.ModelName = ptr("plain")
	if _, err := svc.SelectAndReserve(req); err != nil {
		t.Fatalf("select on the worker without max_num_batched_tokens: %v", err)
	}
}
