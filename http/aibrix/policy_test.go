package aibrix

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExamplePolicy(t *testing.T) {
	p, err := LoadPolicy(filepath.Join("testdata", "policy.example.yaml"))
	if err != nil {
		t.Fatalf("LoadPolicy: %v", err)
	}
	if p.SessionKey != "sessionId" || p.SessionTTL != 15*time.Minute || p.NoMatchReason != "NoApplicablePolicy" {
		t.Fatalf("header fields = %+v", p)
	}
	if len(p.Requirements) != 2 || len(p.Preferences) != 2 || len(p.Deny) != 1 {
		t.Fatalf("rule counts = %d/%d/%d", len(p.Requirements), len(p.Preferences), len(p.Deny))
	}
	if got := p.Preferences[0].Values; len(got) != 1 || got[0] != "cn-east-1a" {
		t.Fatalf("scalar value set = %v", got)
	}
	if got := p.Preferences[1].Context["tenantTier"]; len(got) != 2 {
		t.Fatalf("list value set = %v", got)
	}
	if p.Load != DefaultLoadWeights {
		t.Fatalf("load = %+v, want defaults %+v", p.Load, DefaultLoadWeights)
	}
	// The example must behave as its comments say.
	req := &Request{RequestID: "r", Model: "premium-model", PolicyMode: Authoritative, Candidates: []Candidate{
		{ID: "default/a", Ports: []int{8000}, Attributes: Attributes{{"routing.example.com/accelerator-class", "a100"}}},
		{ID: "default/b", Ports: []int{8000}, Attributes: Attributes{{"routing.example.com/accelerator-class", "h100"}}},
	}}
	if d := Evaluate(req, p, nil, nil); d.Decision != Selected || d.Target.ID != "default/b" {
		t.Fatalf("premium model decision = %+v", d)
	}
	req.PolicyContext = Attributes{{"tenantTier", "suspended"}}
	if d := Evaluate(req, p, nil, nil); d.Decision != Denied || d.Reason != "CompliancePolicy" {
		t.Fatalf("suspended tenant decision = %+v", d)
	}
}

func TestParsePolicyJSON(t *testing.T) {
	p, err := ParsePolicy([]byte(`{"sessionKey":"sid","requirements":[{"attribute":"gpu","values":["h100"],"models":["m"]}],
		"load":{"requests":2}}`))
	if err != nil {
		t.Fatalf("ParsePolicy: %v", err)
	}
	if p.Load.Requests != 2 || p.Load.KVCacheUsage != DefaultLoadWeights.KVCacheUsage {
		t.Fatalf("partial load block must keep defaults for unset weights: %+v", p.Load)
	}
	if p.SessionTTL != DefaultSessionTTL || p.NoMatchReason != DefaultNoMatchReason {
		t.Fatalf("defaults not applied: %+v", p)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	tests := []struct {
		name, doc, field string
	}{
		{"empty", "", "empty"},
		{"unknown field", "sessionkey: x\n", "sessionkey"},
		{"duplicate key", "sessionKey: a\nsessionKey: b\n", "already defined"},
		{"two documents", "sessionKey: a\n---\nsessionKey: b\n", "exactly one document"},
		{"bad session key", "sessionKey: 1bad\n", "sessionKey"},
		{"negative ttl", "sessionTTL: -1s\n", "sessionTTL"},
		{"bad ttl", "sessionTTL: soon\n", "sessionTTL"},
		{"requirement attribute", "requirements:\n- attribute: 'a b'\n  values: [x]\n", "requirements[0].attribute"},
		{"requirement no values", "requirements:\n- attribute: gpu\n", "requirements[0].values"},
		{"requirement empty model", "requirements:\n- attribute: gpu\n  values: [x]\n  models: ['']\n", "requirements[0].models[0]"},
		{"requirement context name", "requirements:\n- attribute: gpu\n  values: [x]\n  context: {'9x': y}\n", "requirements[0].context"},
		{"requirement context empty", "requirements:\n- attribute: gpu\n  values: [x]\n  context: {tier: []}\n", "requirements[0].context.tier"},
		{"preference zero weight", "preferences:\n- attribute: zone\n  values: [a]\n", "preferences[0].weight"},
		{"preference nan weight", "preferences:\n- attribute: zone\n  values: [a]\n  weight: .nan\n", "preferences[0].weight"},
		{"deny unscoped", "deny:\n- reason: No\n", "deny[0]"},
		{"deny no reason", "deny:\n- models: [m]\n", "deny[0].reason"},
		{"deny long reason", "deny:\n- models: [m]\n  reason: " + strings.Repeat("r", 257) + "\n", "deny[0].reason"},
		{"negative load", "load:\n  kvCacheUsage: -1\n", "load.kvCacheUsage"},
		{"inf load", "load:\n  decodeBlocks: .inf\n", "load.decodeBlocks"},
		{"long no-match reason", "noMatchReason: " + strings.Repeat("r", 257) + "\n", "noMatchReason"},
		{"wrong type", "requirements: 5\n", "requirements"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tt.doc))
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("err = %v, want ErrInvalidPolicy", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %q does not name %q", err, tt.field)
			}
		})
	}
}

func TestLoadPolicyMissingFile(t *testing.T) {
	_, err := LoadPolicy(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, ErrInvalidPolicy) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
}

// TestPolicyWeightsBounded: weights beyond MaxWeight are refused, because sums of such terms can
// overflow to ±Inf and their differences to NaN, which would make the choice depend on the
// candidates' wire order (found in review).
func TestPolicyWeightsBounded(t *testing.T) {
	for _, doc := range []string{
		"preferences:\n  - name: p\n    attribute: zone\n    values: a\n    weight: 1e308\n",
		"preferences:\n  - name: p\n    attribute: zone\n    values: a\n    weight: -2e9\n",
		"load:\n  requests: 1e12\n",
	} {
		if _, err := ParsePolicy([]byte(doc)); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("policy %q: err %v, want ErrInvalidPolicy", doc, err)
		}
	}
	if _, err := ParsePolicy([]byte("preferences:\n  - name: p\n    attribute: zone\n    values: a\n    weight: 1e9\n")); err != nil {
		t.Fatalf("a weight of MaxWeight refused: %v", err)
	}
}

// TestRequestIDHeaderTrimmed: net/http trims spaces around header values, so a schema-valid
// request id ending in a space must still match its (trimmed) X-Request-Id header.
func TestRequestIDHeaderTrimmed(t *testing.T) {
	h := http.Header{}
	h.Set("X-Request-Id", "req-1")
	if p := checkRequestIDHeader(h, "req-1 "); p != nil {
		t.Fatalf("trimmed header refused: %+v", p)
	}
	if p := checkRequestIDHeader(h, "req-2"); p == nil {
		t.Fatal("a different id accepted")
	}
}
