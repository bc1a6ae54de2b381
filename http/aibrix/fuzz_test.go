package aibrix

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeRequest: DecodeRequest never panics; every error wraps one
// sentinel; every accepted request is valid JSON, satisfies the documented
// invariants, and survives an encode/decode round trip unchanged.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(mustJSON(f, baseDoc()))
	f.Add([]byte(`{"apiVersion":"routing.aibrix.ai/v1alpha1","kind":"ReplicaSelectionRequest","metadata":{"requestId":"r"},"spec":{"model":"m","policyMode":"Authoritative","candidates":[{"id":"a/b","ports":[1]}]}}`))
	f.Add([]byte(`{"kind":"a","kind":"a"}`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`{"a":"\ud83d\ude00"}`))
	f.Add([]byte(`[[[[[[[[[[[[]]]]]]]]]]]]`))
	f.Add([]byte(`{"spec":{"candidates":[{"ports":[8e3,1.0,-0]}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body)
		if err != nil {
			if !errors.Is(err, ErrEmptyBody) && !errors.Is(err, ErrMalformedJSON) && !errors.Is(err, ErrDuplicateMember) &&
				!errors.Is(err, ErrTrailingData) && !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error without sentinel: %v", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if req.RequestID == "" || len(req.RequestID) > MaxIDBytes || !utf8.ValidString(req.RequestID) || req.Model == "" || len(req.Candidates) == 0 {
			t.Fatalf("envelope invariant broken: %+v", req)
		}
		ids := map[string]bool{}
		for _, c := range req.Candidates {
			if ids[c.ID] || len(c.Ports) == 0 || !slices.IsSorted(c.Ports) || c.Ports[0] < 1 || c.Ports[len(c.Ports)-1] > 65535 {
				t.Fatalf("candidate invariant broken: %+v", c)
			}
			ids[c.ID] = true
		}
		enc := AppendRequest(nil, req)
		again, err := DecodeRequest(enc)
		if err != nil {
			t.Fatalf("re-encoded request rejected: %v\n%s", err, enc)
		}
		if enc2 := AppendRequest(nil, again); string(enc2) != string(enc) {
			t.Fatalf("round trip changed the request:\n%s\n%s", enc, enc2)
		}
		d := Evaluate(req, nil, nil, nil)
		if !d.Decision.Legal(req.PolicyMode) || d.Decision != Selected || !ids[d.Target.ID] {
			t.Fatalf("illegal decision %+v", d)
		}
	})
}
