package aibrix

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestAppendResponseShapes(t *testing.T) {
	tests := []struct {
		name string
		r    Response
		want string
	}{
		{"selected", Response{RequestID: "req-123", DecisionID: "decision-456", Decision: Selected, Target: Target{"default/llama-3-a", 8000}},
			`{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionResponse","metadata":{"requestId":"req-123","decisionId":"decision-456"},"status":{"decision":"Selected","target":{"id":"default/llama-3-a","port":8000}}}`},
		{"no decision without optionals", Response{RequestID: "req-123", Decision: NoDecision, Reason: "NoApplicablePolicy"},
			`{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionResponse","metadata":{"requestId":"req-123"},"status":{"decision":"NoDecision","reason":"NoApplicablePolicy"}}`},
		{"denied ignores target", Response{RequestID: "r", DecisionID: "d", Decision: Denied, Target: Target{"x/y", 1}, Reason: "CompliancePolicy"},
			`{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionResponse","metadata":{"requestId":"r","decisionId":"d"},"status":{"decision":"Denied","reason":"CompliancePolicy"}}`},
	}
	for _, tt := range tests {
		if got := string(AppendResponse(nil, &tt.r)); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// TestRequestRoundTrip: AppendRequest output decodes to the same Request.
func TestRequestRoundTrip(t *testing.T) {
	in := Request{RequestID: "id<1>", Model: "m", PolicyMode: Authoritative,
		PolicyContext: Attributes{{"tier", "gold"}, {"sid", "s\"1"}},
		Candidates: []Candidate{
			{ID: "ns/a", Ports: []int{1, 8000, 65535}, Attributes: Attributes{{"zone", "z1"}},
				Metrics: Metrics{RunningRequests: 3, HasRunningRequests: true, KVCacheUsage: 1e-07, HasKVCacheUsage: true}},
			{ID: "ns/b", Ports: []int{8000}, Metrics: Metrics{EngineUtilization: 1, HasEngineUtilization: true}},
			{ID: "ns/c", Ports: []int{8000}},
		}}
	b := AppendRequest(nil, &in)
	out, err := DecodeRequest(b)
	if err != nil {
		t.Fatalf("DecodeRequest(%s): %v", b, err)
	}
	if got, want := string(AppendRequest(nil, out)), string(b); got != want {
		t.Fatalf("round trip differs:\n got %s\nwant %s", got, want)
	}
	if strings.Contains(string(b), "null") {
		t.Fatalf("request encoding contains null: %s", b)
	}
}

func TestAppendProblem(t *testing.T) {
	b := AppendProblem(nil, &Problem{Type: ProblemInvalidRequest, Title: "T", Status: 400, Detail: "d", Field: "spec.model"})
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["type"] != ProblemInvalidRequest || m["title"] != "T" || m["status"] != 400.0 || m["detail"] != "d" || m["field"] != "spec.model" {
		t.Fatalf("problem = %v", m)
	}
	if b := AppendProblem(nil, &Problem{Type: "t", Title: "T", Status: 401}); strings.Contains(string(b), "detail") {
		t.Fatalf("empty detail must be omitted: %s", b)
	}
}

func TestNewDecisionID(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id, err := NewDecisionID(cryptoReader{})
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != 36 || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) || id[8] != '-' || id[23] != '-' {
			t.Fatalf("not a canonical UUIDv4: %s", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
	}
	if _, err := NewDecisionID(strings.NewReader("short")); !errors.Is(err, ErrDecisionID) {
		t.Fatalf("short entropy err = %v", err)
	}
}
