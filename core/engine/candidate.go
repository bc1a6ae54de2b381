package engine

import (
	"maps"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/kvwire"
)

// Candidate is what the cost function — and custom Scorers — see of one schedulable
// (worker, DP rank) during a selection.
//
// Ownership: a Candidate lives in the engine's scratch memory and is valid only during the call
// that receives it; implementations must not retain it (or Worker's maps) or modify it.
type Candidate struct {
	kvwire.Owner
	// Worker is the worker's catalog view (shared, immutable; never modify its maps).
	Worker *WorkerInfo
	// Tiered prefix overlap with the request, in blocks (Mooncake "cumulative" semantics):
	// DeviceBlocks from the root, then HostExtBlocks further in host-pinned memory, then
	// DiskExtBlocks further on disk or external storage.
	DeviceBlocks, HostExtBlocks, DiskExtBlocks int32
	// BookedPrefixBlocks is how many leading prompt blocks live bookings hold on this rank
	// (cached or being computed; their KV events may not have arrived yet).
	BookedPrefixBlocks int
	// Load is the rank's active load before this request.
	Load *load.RankLoad
}

// WorkerInfo is an immutable snapshot of a worker's catalog record for scorers.
type WorkerInfo struct {
	ID                  uint64
	ModelName           string
	RoutingGroup        string
	Endpoint            string
	StableRoutingID     string
	MaxNumBatchedTokens uint64 // 0 when not registered
	TotalKVBlocks       uint64 // 0 when not registered
	Taints              map[string]struct{}
	TopologyDomains     map[string]string
	HintWorkerType      string
}

// info returns the worker's immutable snapshot, built on first use (a worker object is replaced,
// never mutated, on every catalog change).
func (w *worker) info() *WorkerInfo {
	if w.infoCache == nil {
		w.infoCache = &WorkerInfo{
			ID: w.id, ModelName: w.key.Model, RoutingGroup: w.key.Group, Endpoint: w.endpoint(),
			StableRoutingID:     deref(w.spec.StableRoutingID, ""),
			MaxNumBatchedTokens: deref(w.spec.MaxNumBatchedTokens, 0),
			TotalKVBlocks:       deref(w.spec.TotalKVBlocks, 0),
			Taints:              w.taints,
			TopologyDomains:     maps.Clone(w.spec.TopologyDomains),
			HintWorkerType:      deref(w.spec.RouterHintWorkerType, ""),
		}
	}
	return w.infoCache
}
