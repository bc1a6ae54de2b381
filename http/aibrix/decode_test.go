package aibrix

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// baseDoc returns a valid request as a generic document that tests mutate.
func baseDoc() map[string]any {
	return map[string]any{
		"apiVersion": APIVersion,
		"kind":       KindRequest,
		"metadata":   map[string]any{"requestId": "req-123"},
		"spec": map[string]any{
			"model":         "llama-3",
			"policyMode":    "Advisory",
			"policyContext": map[string]any{"attributes": map[string]any{"tenantTier": "gold"}},
			"candidates": []any{
				map[string]any{
					"id": "default/llama-3-a", "ports": []any{8001, 8000},
					"attributes": map[string]any{"topology.kubernetes.io/zone": "cn-east-1a"},
					"metrics":    map[string]any{"runningRequests": 4, "engineUtilization": 0.61, "kvCacheUsage": 0.48},
				},
				map[string]any{"id": "default/llama-3-b", "ports": []any{8000}},
			},
		},
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func spec(d map[string]any) map[string]any { return d["spec"].(map[string]any) }
func cand(d map[string]any, i int) map[string]any {
	return spec(d)["candidates"].([]any)[i].(map[string]any)
}

func TestDecodeRequestValid(t *testing.T) {
	req, err := DecodeRequest(mustJSON(t, baseDoc()))
	if err != nil {
		t.Fatalf("DecodeRequest: %v", err)
	}
	if req.RequestID != "req-123" || req.Model != "llama-3" || req.PolicyMode != Advisory {
		t.Fatalf("envelope = %+v", req)
	}
	if v, ok := req.PolicyContext.Lookup("tenantTier"); !ok || v != "gold" {
		t.Fatalf("policy context = %v", req.PolicyContext)
	}
	if len(req.Candidates) != 2 {
		t.Fatalf("candidates = %d", len(req.Candidates))
	}
	a := req.Candidates[0]
	if a.ID != "default/llama-3-a" || len(a.Ports) != 2 || a.Ports[0] != 8000 || a.Ports[1] != 8001 {
		t.Fatalf("candidate a = %+v (ports must be sorted)", a)
	}
	m := a.Metrics
	if !m.HasRunningRequests || m.RunningRequests != 4 || !m.HasKVCacheUsage || m.KVCacheUsage != 0.48 ||
		!m.HasEngineUtilization || m.EngineUtilization != 0.61 {
		t.Fatalf("metrics = %+v", m)
	}
	if b := req.Candidates[1]; b.Metrics.HasRunningRequests || b.Attributes != nil {
		t.Fatalf("absent optionals must stay absent: %+v", b)
	}
}

// TestDecodeRequestRules has one row per validation rule; each row states
// the sentinel and the field the error must name.
func TestDecodeRequestRules(t *testing.T) {
	long := strings.Repeat("x", 257)
	tests := []struct {
		name  string
		body  func() []byte
		want  error
		field string
	}{
		{"empty body", raw(""), ErrEmptyBody, ""},
		{"whitespace body", raw(" \n\t"), ErrEmptyBody, ""},
		{"malformed", raw(`{"apiVersion":`), ErrMalformedJSON, "apiVersion"},
		{"bad literal", raw(`{"a":tru}`), ErrMalformedJSON, "a"},
		{"invalid utf8", raw("{\"a\":\"\xff\"}"), ErrMalformedJSON, "a"},
		{"lone surrogate", raw(`{"a":"\ud800"}`), ErrMalformedJSON, "a"},
		{"bom", raw("\xef\xbb\xbf{}"), ErrMalformedJSON, ""},
		{"too deep", raw(strings.Repeat("[", 100) + strings.Repeat("]", 100)), ErrMalformedJSON, strings.Repeat("[0]", 64)},
		{"duplicate top", raw(`{"kind":"a","kind":"b"}`), ErrDuplicateMember, "kind"},
		{"duplicate nested", raw(`{"spec":{"candidates":[{"id":"a/b","id":"a/c"}]}}`), ErrDuplicateMember, "spec.candidates[0].id"},
		{"duplicate escaped", raw(`{"metadata":{"requestId":"x","request\u0049d":"y"}}`), ErrDuplicateMember, "metadata.requestId"},
		{"trailing value", appendRaw(" {}"), ErrTrailingData, ""},
		{"trailing garbage", appendRaw("x"), ErrTrailingData, ""},
		{"not an object", raw(`[1]`), ErrInvalidRequest, ""},
		{"null document", raw(`null`), ErrInvalidRequest, ""},
		{"apiVersion missing", del("apiVersion"), ErrInvalidRequest, "apiVersion"},
		{"apiVersion wrong", set("apiVersion", "routing.aibrix.ai/v1"), ErrInvalidRequest, "apiVersion"},
		{"apiVersion null", set("apiVersion", nil), ErrInvalidRequest, "apiVersion"},
		{"apiVersion number", set("apiVersion", 1), ErrInvalidRequest, "apiVersion"},
		{"kind wrong", set("kind", "ReplicaSelectionResponse"), ErrInvalidRequest, "kind"},
		{"kind missing", del("kind"), ErrInvalidRequest, "kind"},
		{"metadata missing", del("metadata"), ErrInvalidRequest, "metadata"},
		{"metadata null", set("metadata", nil), ErrInvalidRequest, "metadata"},
		{"requestId missing", set("metadata", map[string]any{}), ErrInvalidRequest, "metadata.requestId"},
		{"requestId empty", set("metadata", map[string]any{"requestId": ""}), ErrInvalidRequest, "metadata.requestId"},
		{"requestId too long", set("metadata", map[string]any{"requestId": long}), ErrInvalidRequest, "metadata.requestId"},
		{"requestId 256 multibyte bytes", set("metadata", map[string]any{"requestId": strings.Repeat("é", 129)}), ErrInvalidRequest, "metadata.requestId"},
		{"requestId number", set("metadata", map[string]any{"requestId": 5}), ErrInvalidRequest, "metadata.requestId"},
		{"spec missing", del("spec"), ErrInvalidRequest, "spec"},
		{"spec array", set("spec", []any{}), ErrInvalidRequest, "spec"},
		{"model missing", delSpec("model"), ErrInvalidRequest, "spec.model"},
		{"model empty", setSpec("model", ""), ErrInvalidRequest, "spec.model"},
		{"policyMode missing", delSpec("policyMode"), ErrInvalidRequest, "spec.policyMode"},
		{"policyMode lowercase", setSpec("policyMode", "advisory"), ErrInvalidRequest, "spec.policyMode"},
		{"policyContext null", setSpec("policyContext", nil), ErrInvalidRequest, "spec.policyContext"},
		{"policyContext string", setSpec("policyContext", "x"), ErrInvalidRequest, "spec.policyContext"},
		{"context attributes null", setSpec("policyContext", map[string]any{"attributes": nil}), ErrInvalidRequest, "spec.policyContext.attributes"},
		{"context attribute bad name", setSpec("policyContext", map[string]any{"attributes": map[string]any{"1tier": "x"}}), ErrInvalidRequest, "spec.policyContext.attributes"},
		{"context too many", setSpec("policyContext", map[string]any{"attributes": manyAttrs(33)}), ErrInvalidRequest, "spec.policyContext.attributes"},
		{"candidates missing", delSpec("candidates"), ErrInvalidRequest, "spec.candidates"},
		{"candidates empty", setSpec("candidates", []any{}), ErrInvalidRequest, "spec.candidates"},
		{"candidates null", setSpec("candidates", nil), ErrInvalidRequest, "spec.candidates"},
		{"candidate not object", setSpec("candidates", []any{"default/a"}), ErrInvalidRequest, "spec.candidates[0]"},
		{"candidate id missing", delCand(0, "id"), ErrInvalidRequest, "spec.candidates[0].id"},
		{"candidate id no slash", setCand(1, "id", "llama"), ErrInvalidRequest, "spec.candidates[1].id"},
		{"candidate id two slashes", setCand(1, "id", "a/b/c"), ErrInvalidRequest, "spec.candidates[1].id"},
		{"candidate id empty ns", setCand(1, "id", "/b"), ErrInvalidRequest, "spec.candidates[1].id"},
		{"candidate id empty name", setCand(1, "id", "a/"), ErrInvalidRequest, "spec.candidates[1].id"},
		{"candidate id too long", setCand(1, "id", "a/"+long), ErrInvalidRequest, "spec.candidates[1].id"},
		{"candidate id duplicate", setCand(1, "id", "default/llama-3-a"), ErrInvalidRequest, "spec.candidates[1].id"},
		{"ports missing", delCand(1, "ports"), ErrInvalidRequest, "spec.candidates[1].ports"},
		{"ports empty", setCand(1, "ports", []any{}), ErrInvalidRequest, "spec.candidates[1].ports"},
		{"ports null", setCand(1, "ports", nil), ErrInvalidRequest, "spec.candidates[1].ports"},
		{"port zero", setCand(1, "ports", []any{0}), ErrInvalidRequest, "spec.candidates[1].ports[0]"},
		{"port too big", setCand(1, "ports", []any{8000, 65536}), ErrInvalidRequest, "spec.candidates[1].ports[1]"},
		{"port negative", setCand(1, "ports", []any{-1}), ErrInvalidRequest, "spec.candidates[1].ports[0]"},
		{"port fraction", setCand(1, "ports", []any{8000.5}), ErrInvalidRequest, "spec.candidates[1].ports[0]"},
		{"port string", setCand(1, "ports", []any{"8000"}), ErrInvalidRequest, "spec.candidates[1].ports[0]"},
		{"port bool", setCand(1, "ports", []any{true}), ErrInvalidRequest, "spec.candidates[1].ports[0]"},
		{"ports duplicate", setCand(1, "ports", []any{8000, 8001, 8000}), ErrInvalidRequest, "spec.candidates[1].ports"},
		{"attributes null", setCand(1, "attributes", nil), ErrInvalidRequest, "spec.candidates[1].attributes"},
		{"attributes array", setCand(1, "attributes", []any{}), ErrInvalidRequest, "spec.candidates[1].attributes"},
		{"attribute value number", setCand(1, "attributes", map[string]any{"zone": 1}), ErrInvalidRequest, "spec.candidates[1].attributes.zone"},
		{"attribute value too long", setCand(1, "attributes", map[string]any{"zone": long}), ErrInvalidRequest, "spec.candidates[1].attributes.zone"},
		{"attribute name too long", setCand(1, "attributes", map[string]any{"z" + strings.Repeat("a", 128): "x"}), ErrInvalidRequest, "spec.candidates[1].attributes"},
		{"attribute name bad char", setCand(1, "attributes", map[string]any{"zone:x": "x"}), ErrInvalidRequest, "spec.candidates[1].attributes"},
		{"attributes too many", setCand(1, "attributes", manyAttrs(33)), ErrInvalidRequest, "spec.candidates[1].attributes"},
		{"metrics null", setCand(1, "metrics", nil), ErrInvalidRequest, "spec.candidates[1].metrics"},
		{"running negative", setCand(1, "metrics", map[string]any{"runningRequests": -1}), ErrInvalidRequest, "spec.candidates[1].metrics.runningRequests"},
		{"running fraction", setCand(1, "metrics", map[string]any{"runningRequests": 1.5}), ErrInvalidRequest, "spec.candidates[1].metrics.runningRequests"},
		{"running null", setCand(1, "metrics", map[string]any{"runningRequests": nil}), ErrInvalidRequest, "spec.candidates[1].metrics.runningRequests"},
		{"kv above one", setCand(1, "metrics", map[string]any{"kvCacheUsage": 1.01}), ErrInvalidRequest, "spec.candidates[1].metrics.kvCacheUsage"},
		{"kv negative", setCand(1, "metrics", map[string]any{"kvCacheUsage": -0.1}), ErrInvalidRequest, "spec.candidates[1].metrics.kvCacheUsage"},
		{"util above one", setCand(1, "metrics", map[string]any{"engineUtilization": 2}), ErrInvalidRequest, "spec.candidates[1].metrics.engineUtilization"},
		{"util string", setCand(1, "metrics", map[string]any{"engineUtilization": "0.5"}), ErrInvalidRequest, "spec.candidates[1].metrics.engineUtilization"},
		{"kv overflow", raw(strings.Replace(string(mustJSON(t, baseDoc())), `"kvCacheUsage":0.48`, `"kvCacheUsage":1e999`, 1)), ErrInvalidRequest, "spec.candidates[0].metrics.kvCacheUsage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest(tt.body())
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err %T is not a *RequestError", err)
			}
			if re.Field != tt.field {
				t.Fatalf("field = %q, want %q (err %v)", re.Field, tt.field, err)
			}
			if re.Title == "" || re.Detail == "" {
				t.Fatalf("title/detail must be set: %+v", re)
			}
		})
	}
}

// TestDecodeRequestAccepts pins inputs the contract allows.
func TestDecodeRequestAccepts(t *testing.T) {
	tests := []struct {
		name  string
		body  func() []byte
		check func(*Request) bool
	}{
		{"unknown members ignored", set("future", map[string]any{"ok": true}), nil},
		{"unknown spec member of any type", setSpec("priority", nil), nil},
		{"integral float port", setCand(1, "ports", []any{8000.0}), func(r *Request) bool { return r.Candidates[1].Ports[0] == 8000 }},
		{"exponent port", raw(strings.Replace(string(mustJSON(t, baseDoc())), `"ports":[8000]`, `"ports":[8e3]`, 1)), func(r *Request) bool { return r.Candidates[1].Ports[0] == 8000 }},
		{"boundary ports", setCand(1, "ports", []any{65535, 1}), func(r *Request) bool { return r.Candidates[1].Ports[0] == 1 && r.Candidates[1].Ports[1] == 65535 }},
		{"requestId 256 bytes", set("metadata", map[string]any{"requestId": strings.Repeat("r", 256)}), nil},
		{"escaped requestId", set("metadata", map[string]any{"requestId": "a<b>&\"c\u2028"}), func(r *Request) bool { return r.RequestID == "a<b>&\"c\u2028" }},
		{"32 attributes", setCand(1, "attributes", manyAttrs(32)), func(r *Request) bool { return len(r.Candidates[1].Attributes) == 32 }},
		{"empty attributes object", setCand(1, "attributes", map[string]any{}), nil},
		{"ratios at bounds", setCand(1, "metrics", map[string]any{"kvCacheUsage": 0, "engineUtilization": 1}), nil},
		{"trailing whitespace", appendRaw("\n\r\t "), nil},
		{"authoritative", setSpec("policyMode", "Authoritative"), func(r *Request) bool { return r.PolicyMode == Authoritative }},
		{"no policyContext", delSpec("policyContext"), func(r *Request) bool { return r.PolicyContext == nil }},
		{"value of 256 multibyte chars", setCand(1, "attributes", map[string]any{"zone": strings.Repeat("é", 256)}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRequest(tt.body())
			if err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if tt.check != nil && !tt.check(r) {
				t.Fatalf("decoded request does not hold: %+v", r)
			}
		})
	}
}

func TestDecodeManyCandidatesUsesMapForDuplicates(t *testing.T) {
	d := baseDoc()
	var cs []any
	for i := 0; i < 100; i++ {
		cs = append(cs, map[string]any{"id": "ns/p" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), "ports": []any{8000}})
	}
	cs = append(cs, map[string]any{"id": "ns/pa", "ports": []any{8000}})
	spec(d)["candidates"] = cs
	_, err := DecodeRequest(mustJSON(t, d))
	var re *RequestError
	if !errors.As(err, &re) || re.Field != "spec.candidates[100].id" || !strings.Contains(re.Detail, "spec.candidates[0]") {
		t.Fatalf("err = %v", err)
	}
}

func raw(s string) func() []byte { return func() []byte { return []byte(s) } }

func appendRaw(s string) func() []byte {
	return func() []byte { b, _ := json.Marshal(baseDoc()); return append(b, s...) }
}

func set(k string, v any) func() []byte {
	return func() []byte { d := baseDoc(); d[k] = v; b, _ := json.Marshal(d); return b }
}

func del(k string) func() []byte {
	return func() []byte { d := baseDoc(); delete(d, k); b, _ := json.Marshal(d); return b }
}

func setSpec(k string, v any) func() []byte {
	return func() []byte { d := baseDoc(); spec(d)[k] = v; b, _ := json.Marshal(d); return b }
}

func delSpec(k string) func() []byte {
	return func() []byte { d := baseDoc(); delete(spec(d), k); b, _ := json.Marshal(d); return b }
}

func setCand(i int, k string, v any) func() []byte {
	return func() []byte { d := baseDoc(); cand(d, i)[k] = v; b, _ := json.Marshal(d); return b }
}

func delCand(i int, k string) func() []byte {
	return func() []byte { d := baseDoc(); delete(cand(d, i), k); b, _ := json.Marshal(d); return b }
}

func manyAttrs(n int) map[string]any {
	m := make(map[string]any, n)
	for i := 0; i < n; i++ {
		m["attr"+strings.Repeat("x", i)] = "v"
	}
	return m
}
