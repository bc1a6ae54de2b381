// Package aibrixcore is the one adapter between kvselect's core and the AIBrix decision handler:
// [Backend] serves the handler's load queries from a core.Service, [Sessions] keeps its session
// bindings in core's replicated AIBrix session table.
//
// Dependency direction: http/aibrix is the AIBrix protocol (decode, policy, evaluation,
// handler) and never imports core, so the conformance checker and core's own tests link it
// without the service; core knows nothing of AIBrix requests. This package is the only one that
// sees both, and whoever serves AIBrix (cmd/kvselect, tests) builds the handler with it. http/api
// only mounts the finished handler.
package aibrixcore

import (
	"math"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/http/aibrix"
)

// Backend adapts a core.Service to the handler's [aibrix.Backend]: a candidate "namespace/pod"
// maps to the registered worker whose stable_routing_id equals it, in a partition whose
// model_name equals the request's model, and its load is kvselect's own active-load accounting,
// which replicas share over the bus.
type Backend struct{ Svc *core.Service }

var _ aibrix.Backend = Backend{}

// CandidateLoad implements aibrix.Backend.
func (b Backend) CandidateLoad(model, candidateID string) ([]aibrix.RankLoad, bool) {
	loads, ok := b.Svc.WorkerLoadsByStableID(model, candidateID)
	if !ok {
		return nil, false
	}
	out := make([]aibrix.RankLoad, len(loads))
	for i, l := range loads {
		out[i] = aibrix.RankLoad{Rank: l.Owner.Rank, ActivePrefillTokens: l.ActivePrefillTokens, ActiveDecodeBlocks: l.ActiveBlocks, ActiveRequests: l.ActiveRequests}
	}
	return out, true
}

// Sessions adapts kvselect's replicated AIBrix session table to the handler's
// [aibrix.SessionStore], so a session sticks to one candidate whichever replica the gateway
// asks: bindings made here are published to peers, peers' bindings are applied to the same
// table (see core.Service.EnableAIBrixSessions). It adds no state or locking of its own.
//
// A port outside 0..65535 (never produced by a decision) is stored as 0, which no candidate
// advertises, so the handler then picks the port afresh instead of trusting it.
type Sessions struct{ Table *core.AIBrixSessions }

var _ aibrix.SessionStore = Sessions{}

// Get implements aibrix.SessionStore.
func (s Sessions) Get(key aibrix.SessionKey, now time.Time) (aibrix.Binding, bool) {
	t, ok := s.Table.Get(core.AIBrixSessionKey{Model: key.Model, Session: key.Value}, now)
	if !ok {
		return aibrix.Binding{}, false
	}
	return aibrix.Binding{CandidateID: t.Candidate, Port: int(t.Port)}, true
}

// Bind implements aibrix.SessionStore.
func (s Sessions) Bind(key aibrix.SessionKey, b aibrix.Binding, ttl time.Duration, now time.Time) {
	port := uint32(0)
	if b.Port >= 0 && b.Port <= math.MaxUint16 {
		port = uint32(b.Port)
	}
	s.Table.Bind(core.AIBrixSessionKey{Model: key.Model, Session: key.Value},
		core.AIBrixTarget{Candidate: b.CandidateID, Port: port}, ttl, now)
}
