package api

import (
	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/http/aibrix"
)

// AIBrixBackend adapts a core.Service to the AIBrix decision handler: a candidate
// "namespace/pod" maps to the registered worker whose stable_routing_id equals it, in a partition
// whose model_name equals the request's model, and its load is kvselect's own active-load
// accounting, which replicas share over the bus.
type AIBrixBackend struct{ Svc *core.Service }

var _ aibrix.Backend = AIBrixBackend{}

// CandidateLoad implements aibrix.Backend.
func (b AIBrixBackend) CandidateLoad(model, candidateID string) ([]aibrix.RankLoad, bool) {
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
