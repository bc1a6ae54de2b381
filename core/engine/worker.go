package engine

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// MaxDataParallelSize is the largest data_parallel_size a worker may register (kvselect's limit;
// Dynamo has none).
const MaxDataParallelSize = 1024

// Lifecycle states of a catalog record.
const (
	LifecycleIncomplete    = "incomplete"    // registered but missing metadata or failed reconciliation
	LifecycleSchedulable   = "schedulable"   // eligible for selection
	LifecycleDraining      = "draining"      // being removed or moved; not selectable
	LifecycleUnschedulable = "unschedulable" // removed (returned by DELETE)
)

// WorkerSpec is the body of POST /workers (and, with every field optional, the merged result of a
// PATCH). Pointer fields distinguish "absent" from zero values: the catalog record echoes an
// absent optional scalar as JSON null, exactly as Dynamo does.
type WorkerSpec struct {
	WorkerID                         *uint64           `json:"worker_id"`
	ModelName                        *string           `json:"model_name"`
	RoutingGroup                     *string           `json:"routing_group"`
	Endpoint                         *string           `json:"endpoint"`
	KVEventsEndpoint                 *string           `json:"kv_events_endpoint"`
	KVEventsEndpoints                map[string]string `json:"kv_events_endpoints"`
	ReplayEndpoint                   *string           `json:"replay_endpoint"`
	BlockSize                        *uint32           `json:"block_size"`
	DataParallelStartRank            *uint32           `json:"data_parallel_start_rank"`
	DataParallelSize                 *uint32           `json:"data_parallel_size"`
	MaxNumBatchedTokens              *uint64           `json:"max_num_batched_tokens"`
	TotalKVBlocks                    *uint64           `json:"total_kv_blocks"`
	StableRoutingID                  *string           `json:"stable_routing_id"`
	IsEagle                          *bool             `json:"is_eagle"`
	Taints                           []string          `json:"taints"`
	TopologyDomains                  map[string]string `json:"topology_domains"`
	KVTransferDomain                 *string           `json:"kv_transfer_domain"`
	KVTransferEnforcement            *string           `json:"kv_transfer_enforcement"`
	KVTransferPreferredWeight        *float32          `json:"kv_transfer_preferred_weight"`
	RouterHintWorkerType             *string           `json:"router_hint_worker_type"`
	RouterHintSourceControlEndpoints map[string]string `json:"router_hint_source_control_endpoints"`
	KVEventSourceMode                *string           `json:"kv_event_source_mode"`
}

// WorkerPatch is the body of PATCH /workers/{id}: only supplied (non-null) fields change; map and
// set fields are replaced wholesale. model_name, routing_group and worker_id are not patchable.
type WorkerPatch = WorkerSpec

// WorkerRecord is the catalog record returned by every /workers route.
type WorkerRecord struct {
	WorkerID                         uint64            `json:"worker_id"`
	ModelName                        string            `json:"model_name"`
	RoutingGroup                     string            `json:"routing_group"`
	Endpoint                         *string           `json:"endpoint"`
	KVEventsEndpoint                 *string           `json:"kv_events_endpoint"`
	KVEventsEndpoints                map[string]string `json:"kv_events_endpoints,omitempty"`
	ReplayEndpoint                   *string           `json:"replay_endpoint"`
	BlockSize                        *uint32           `json:"block_size"`
	DataParallelStartRank            *uint32           `json:"data_parallel_start_rank"`
	DataParallelSize                 *uint32           `json:"data_parallel_size"`
	MaxNumBatchedTokens              *uint64           `json:"max_num_batched_tokens"`
	TotalKVBlocks                    *uint64           `json:"total_kv_blocks"`
	StableRoutingID                  *string           `json:"stable_routing_id"`
	IsEagle                          *bool             `json:"is_eagle"`
	Taints                           []string          `json:"taints"`
	TopologyDomains                  map[string]string `json:"topology_domains"`
	KVTransferDomain                 *string           `json:"kv_transfer_domain"`
	KVTransferEnforcement            *string           `json:"kv_transfer_enforcement"`
	KVTransferPreferredWeight        *float32          `json:"kv_transfer_preferred_weight"`
	RouterHintWorkerType             *string           `json:"router_hint_worker_type,omitempty"`
	RouterHintSourceControlEndpoints map[string]string `json:"router_hint_source_control_endpoints,omitempty"`
	KVEventSourceMode                *string           `json:"kv_event_source_mode,omitempty"`
	Lifecycle                        string            `json:"lifecycle"`
	NotSchedulableReasons            []string          `json:"not_schedulable_reasons,omitempty"`
	// Listeners is a kvselect extension: the state of each rank's KV-event listener, keyed by
	// decimal global DP rank. Filled by the service, never by the engine.
	Listeners map[string]ListenerStatus `json:"listeners,omitempty"`
}

// ListenerStatus is the observable state of one rank's KV-event listener.
type ListenerStatus struct {
	Endpoint  string  `json:"endpoint"`
	Status    string  `json:"status"` // pending, active, failed
	LastError string  `json:"last_error,omitempty"`
	Watermark *uint64 `json:"watermark,omitempty"`
}

// worker is the engine's view of one catalog entry.
//
// Invariant: spec.ModelName and spec.RoutingGroup are non-nil (defaulted at upsert);
// ranks == [start, start+size) when lifecycle is schedulable.
type worker struct {
	id        uint64
	spec      WorkerSpec
	key       PartitionKey
	lifecycle string
	reasons   []string
	// eventEndpoints maps each global DP rank to its KV-event endpoint (resolved from
	// kv_events_endpoints or kv_events_endpoint).
	eventEndpoints map[uint32]string
	// hintSources maps each global DP rank to its hint source control endpoint.
	hintSources map[uint32]string
	taints      map[string]struct{}
	infoCache   *WorkerInfo // built lazily by info(); valid for this worker object's life
}

func (w *worker) schedulable() bool { return w.lifecycle == LifecycleSchedulable }

func (w *worker) startRank() uint32 { return deref(w.spec.DataParallelStartRank, 0) }
func (w *worker) dpSize() uint32    { return deref(w.spec.DataParallelSize, 1) }
func (w *worker) blockSize() uint32 { return deref(w.spec.BlockSize, 0) }
func (w *worker) endpoint() string  { return deref(w.spec.Endpoint, "") }

// hasRank reports whether r is one of the worker's global DP ranks.
func (w *worker) hasRank(r uint32) bool {
	s := w.startRank()
	return r >= s && uint64(r) < uint64(s)+uint64(w.dpSize())
}

func (w *worker) record() WorkerRecord {
	s := &w.spec
	rec := WorkerRecord{
		WorkerID:                  w.id,
		ModelName:                 w.key.Model,
		RoutingGroup:              w.key.Group,
		Endpoint:                  s.Endpoint,
		KVEventsEndpoint:          s.KVEventsEndpoint,
		KVEventsEndpoints:         maps.Clone(s.KVEventsEndpoints),
		ReplayEndpoint:            s.ReplayEndpoint,
		BlockSize:                 s.BlockSize,
		DataParallelStartRank:     s.DataParallelStartRank,
		DataParallelSize:          s.DataParallelSize,
		MaxNumBatchedTokens:       s.MaxNumBatchedTokens,
		TotalKVBlocks:             s.TotalKVBlocks,
		StableRoutingID:           s.StableRoutingID,
		IsEagle:                   s.IsEagle,
		Taints:                    slices.Sorted(maps.Keys(w.taints)),
		TopologyDomains:           maps.Clone(s.TopologyDomains),
		KVTransferDomain:          s.KVTransferDomain,
		KVTransferEnforcement:     s.KVTransferEnforcement,
		KVTransferPreferredWeight: s.KVTransferPreferredWeight,
		RouterHintWorkerType:      s.RouterHintWorkerType,
		KVEventSourceMode:         s.KVEventSourceMode,
		Lifecycle:                 w.lifecycle,
		NotSchedulableReasons:     slices.Clone(w.reasons),
	}
	if len(s.RouterHintSourceControlEndpoints) > 0 {
		rec.RouterHintSourceControlEndpoints = maps.Clone(s.RouterHintSourceControlEndpoints)
	}
	if rec.Taints == nil {
		rec.Taints = []string{}
	}
	if rec.TopologyDomains == nil {
		rec.TopologyDomains = map[string]string{}
	}
	return rec
}

// checkSpec rejects values serde would have refused while deserialising (HTTP 422): rank keys
// that are not u32, enum strings outside their set.
func checkSpec(s *WorkerSpec) error {
	for _, m := range []struct {
		field string
		v     map[string]string
	}{{"kv_events_endpoints", s.KVEventsEndpoints}, {"router_hint_source_control_endpoints", s.RouterHintSourceControlEndpoints}} {
		for _, k := range slices.Sorted(maps.Keys(m.v)) { // the smallest bad key is reported
			if _, err := strconv.ParseUint(k, 10, 32); err != nil {
				return unprocessable("%s: invalid DP rank key %q: expected a u32", m.field, k)
			}
		}
	}
	if e := s.KVTransferEnforcement; e != nil && *e != "required" && *e != "preferred" {
		return unprocessable("kv_transfer_enforcement: unknown variant `%s`, expected `required` or `preferred`", *e)
	}
	if m := s.KVEventSourceMode; m != nil && *m != "framework_v1" && *m != "state_agent_v2" {
		return unprocessable("kv_event_source_mode: unknown variant `%s`, expected `framework_v1` or `state_agent_v2`", *m)
	}
	return nil
}

// rankMap parses a map keyed by decimal DP rank (already checked by checkSpec).
func rankMap(m map[string]string) map[uint32]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[uint32]string, len(m))
	// Keys in sorted order: "1" and "01" name one rank, and the last one written must not
	// depend on map order.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		r, _ := strconv.ParseUint(k, 10, 32)
		out[uint32(r)] = m[k]
	}
	return out
}

// missingMetadata lists why the worker cannot be scheduled, in Dynamo's order (spec §3.4,
// steps 1–5). Partition and listener reconciliation failures are appended by the catalog.
func missingMetadata(w *worker, queueing, kvEvents bool) []string {
	var reasons []string
	s := &w.spec
	if s.Endpoint == nil || *s.Endpoint == "" {
		reasons = append(reasons, "endpoint is required")
	}
	if w.blockSize() == 0 {
		reasons = append(reasons, "block_size must be greater than 0")
	}
	if w.dpSize() == 0 {
		reasons = append(reasons, "data_parallel_size must be greater than 0")
	}
	if w.dpSize() > MaxDataParallelSize {
		// Every rank is a candidate scored on each selection: an absurd size is a mistake (or an
		// attack), not a fleet. The worker stays incomplete.
		reasons = append(reasons, fmt.Sprintf("data_parallel_size must not exceed %d", MaxDataParallelSize))
	}
	// Every rank loop runs a uint32 up to start+size: a range reaching past MaxUint32 would wrap
	// and never end, so such a worker stays incomplete and no loop ever sees its range.
	rangeOK := uint64(w.startRank())+uint64(w.dpSize()) <= math.MaxUint32
	if !rangeOK {
		reasons = append(reasons, fmt.Sprintf("data_parallel_start_rank + data_parallel_size must not exceed %d", uint32(math.MaxUint32)))
	}
	if queueing && s.MaxNumBatchedTokens == nil {
		reasons = append(reasons, "max_num_batched_tokens is required while queueing is enabled")
	}
	if kvEvents && w.dpSize() > 0 && w.dpSize() <= MaxDataParallelSize && rangeOK {
		for r := w.startRank(); uint64(r) < uint64(w.startRank())+uint64(w.dpSize()); r++ {
			if w.eventEndpoints[r] == "" {
				reasons = append(reasons, fmt.Sprintf("kv_events endpoint is required for dp_rank %d", r))
			}
		}
		if w.dpSize() > 1 && s.ReplayEndpoint != nil && *s.ReplayEndpoint != "" {
			reasons = append(reasons, "replay_endpoint is supported only for data_parallel_size 1")
		}
	}
	return reasons
}

// resolveEventEndpoints maps ranks to KV-event endpoints: kv_events_endpoints wins when non-empty;
// otherwise kv_events_endpoint serves the start rank of a single-rank worker.
func resolveEventEndpoints(w *worker) map[uint32]string {
	if len(w.spec.KVEventsEndpoints) > 0 {
		return rankMap(w.spec.KVEventsEndpoints)
	}
	if ep := deref(w.spec.KVEventsEndpoint, ""); ep != "" && w.dpSize() == 1 {
		return map[uint32]string{w.startRank(): ep}
	}
	return nil
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func ptr[T any](v T) *T { return &v }
