package aibrixcheck

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/kvselect/kvselect/http/aibrix"
)

// FuzzValidateDecision: the response validator never panics on any body,
// and whatever it accepts is valid JSON whose decision is legal and whose
// target (if any) is a candidate of the sent snapshot.
func FuzzValidateDecision(f *testing.F) {
	sent := &aibrix.Request{RequestID: "req-123", Model: "m", PolicyMode: aibrix.Advisory,
		Candidates: []aibrix.Candidate{{ID: "default/a", Ports: []int{8000, 8001}}, {ID: "default/b", Ports: []int{8000}}}}
	for _, s := range []string{
		`{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionResponse","metadata":{"requestId":"req-123","decisionId":"d"},"status":{"decision":"Selected","target":{"id":"default/a","port":8001}}}`,
		`{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionResponse","metadata":{"requestId":"req-123"},"status":{"decision":"NoDecision","reason":"x"}}`,
		`{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionResponse","metadata":{"requestId":"req-123"},"status":{"decision":"Selected","target":{"id":"default/b"}}}`,
		`{"status":{"target":null}}`, `[]`, `null`, `{"a":1} 2`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ex := &Exchange{Status: 200, Header: http.Header{"Content-Type": {aibrix.MediaType}}, Body: body}
		results, d := ValidateDecision(ex, sent)
		for _, r := range results {
			if !r.OK {
				return
			}
		}
		if d == nil || !json.Valid(body) {
			t.Fatalf("accepted %q without a decision or as invalid JSON", body)
		}
		if !aibrix.DecisionType(d.Decision).Legal(sent.PolicyMode) {
			t.Fatalf("accepted illegal decision %q", d.Decision)
		}
		if d.Decision == string(aibrix.Selected) && d.TargetID != "default/a" && d.TargetID != "default/b" {
			t.Fatalf("accepted target %q outside the snapshot", d.TargetID)
		}
		if d.RequestID != sent.RequestID {
			t.Fatalf("accepted request id %q", d.RequestID)
		}
	})
}
