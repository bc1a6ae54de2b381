package aibrixcheck

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The Gateway's typed decode (V4), reproduced: Go encoding/json into a response whose members
// are all pointers (aibrix-protocol-spec §5 V4; the Gateway's external/protocol.go). Using the
// same decoder gives the checker the Gateway's exact view of a body, quirks included:
//
//   - member names match case-insensitively, so "Status", "APIVersion" or metadata.RequestId bind
//     to the canonical members;
//   - when a canonical member and a case-variant twin are both present (V2's duplicate check is
//     case-sensitive, so both survive it), the later one wins: a string is overwritten, an object
//     is decoded again into the same value (members it carries override, the others stay), and a
//     null twin clears the member;
//   - null reads as absent; a port must be an integer literal that fits int; invalid UTF-8 in
//     strings becomes U+FFFD.
//
// The envelope, bound and legality rules (V6–V8) run on this view, so a twin that changes what
// the Gateway sees fails a Required rule exactly when the Gateway would reject the response.

type gwResponse struct {
	APIVersion *string     `json:"apiVersion"`
	Kind       *string     `json:"kind"`
	Metadata   *gwMetadata `json:"metadata"`
	Status     *gwStatus   `json:"status"`
}

type gwMetadata struct {
	RequestID  *string `json:"requestId"`
	DecisionID *string `json:"decisionId"`
}

type gwStatus struct {
	Decision *string   `json:"decision"`
	Target   *gwTarget `json:"target"`
	Reason   *string   `json:"reason"`
}

type gwTarget struct {
	ID   *string `json:"id"`
	Port *int    `json:"port"`
}

// gatewayDecode decodes body as the Gateway does and flattens the result into a Decision.
func gatewayDecode(body []byte) (*gwResponse, *Decision, error) {
	var g gwResponse
	if err := json.Unmarshal(body, &g); err != nil {
		return nil, nil, fmt.Errorf("the Gateway's decode fails: %w", err)
	}
	d := &Decision{}
	if g.Metadata != nil {
		if g.Metadata.RequestID != nil {
			d.RequestID = *g.Metadata.RequestID
		}
		if g.Metadata.DecisionID != nil {
			d.DecisionID, d.HasDecisionID = *g.Metadata.DecisionID, true
		}
	}
	if st := g.Status; st != nil {
		if st.Decision != nil {
			d.Decision = *st.Decision
		}
		if st.Reason != nil {
			d.Reason, d.HasReason = *st.Reason, true
		}
		if st.Target != nil {
			d.HasTarget = true
			if st.Target.ID != nil {
				d.TargetID = *st.Target.ID
			}
			if st.Target.Port != nil {
				d.Port, d.HasPort = int64(*st.Target.Port), true
			}
		}
	}
	return &g, d, nil
}

// envelopeMembers lists, per object path, the member names the Gateway decodes.
var envelopeMembers = map[string][]string{
	"":              {"apiVersion", "kind", "metadata", "status"},
	"metadata":      {"requestId", "decisionId"},
	"status":        {"decision", "target", "reason"},
	"status.target": {"id", "port"},
}

// caseVariantMember returns the first member of the envelope objects whose name differs from a
// decoded member only in case ("Status", "metadata.RequestId"), as "path: name (for canonical)",
// or "". The Gateway binds such members (see gatewayDecode); this checker reports them as a
// Recommended rule, because whether the response is then accepted depends on member order.
func caseVariantMember(root *jvalue) string {
	var walk func(path string, v *jvalue) string
	walk = func(path string, v *jvalue) string {
		if !v.isKind('{') {
			return ""
		}
		known := envelopeMembers[path]
		for _, key := range v.keys {
			for _, k := range known {
				if key != k && strings.EqualFold(key, k) {
					return fmt.Sprintf("%s%q (the Gateway reads it as %s)", prefix(path), key, prefix(path)+k)
				}
			}
		}
		for _, k := range known {
			sub := k
			if path != "" {
				sub = path + "." + k
			}
			if _, nested := envelopeMembers[sub]; !nested {
				continue
			}
			if c, ok := v.get(k); ok {
				if s := walk(sub, c); s != "" {
					return s
				}
			}
		}
		return ""
	}
	return walk("", root)
}

func prefix(path string) string {
	if path == "" {
		return ""
	}
	return path + "."
}
