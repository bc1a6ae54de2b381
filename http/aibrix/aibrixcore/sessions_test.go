package aibrixcore

import (
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/http/aibrix"
)

// TestSessionsAdapter: the adapter maps keys and bindings one to one onto the core
// table, stores an impossible port as 0 (so the handler re-picks the port), and shares the
// table's expiry.
func TestSessionsAdapter(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	key := aibrix.SessionKey{Model: "llama", Value: "user-1"}
	tests := []struct {
		name     string
		port     int
		wantPort int
	}{
		{"ordinary port", 8000, 8000},
		{"highest port", 65535, 65535},
		{"negative port", -1, 0},
		{"port beyond u16", 70000, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tbl := core.NewAIBrixSessions(core.AIBrixSessionConfig{}, 1, nil)
			s := Sessions{Table: tbl}
			s.Bind(key, aibrix.Binding{CandidateID: "ns/pod", Port: tt.port}, time.Minute, now)
			got, ok := s.Get(key, now.Add(time.Minute-1))
			if !ok || got != (aibrix.Binding{CandidateID: "ns/pod", Port: tt.wantPort}) {
				t.Fatalf("Get = %+v, %v", got, ok)
			}
			if direct, ok := tbl.Get(core.AIBrixSessionKey{Model: "llama", Session: "user-1"}, now); !ok || direct.Candidate != "ns/pod" {
				t.Fatalf("core table holds %+v, %v", direct, ok)
			}
			if _, ok := s.Get(key, now.Add(time.Minute)); ok {
				t.Fatal("binding outlived its TTL")
			}
			if _, ok := s.Get(aibrix.SessionKey{Model: "other", Value: "user-1"}, now); ok {
				t.Fatal("session leaked across models")
			}
		})
	}
}
