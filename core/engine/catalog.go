package engine

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/kvwire"
)

// DefaultName is the model_name and routing_group used when a request omits them.
const DefaultName = "default"

// UpsertWorker registers or replaces a worker's catalog record (POST /workers). The record is
// returned even when the worker is incomplete; only malformed input is an error (422).
//
// Reconciliation follows the seed's "Worker Restarts" rules rank by rank: a rank whose KV-event
// and replay endpoints are unchanged keeps its indexed blocks; a rank whose endpoint changed or
// that left the worker's DP range loses them. Live bookings on ranks present in both the old and
// the new topology survive.
func (e *Engine) UpsertWorker(spec WorkerSpec) (WorkerRecord, error) {
	if spec.WorkerID == nil {
		return WorkerRecord{}, unprocessable("missing field `worker_id`")
	}
	if err := checkSpec(&spec); err != nil {
		return WorkerRecord{}, err
	}
	if spec.ModelName == nil {
		spec.ModelName = ptr(DefaultName)
	}
	if spec.RoutingGroup == nil {
		spec.RoutingGroup = ptr(DefaultName)
	}
	if err := e.admitWorker(*spec.WorkerID, PartitionKey{Model: *spec.ModelName, Group: *spec.RoutingGroup}); err != nil {
		return WorkerRecord{}, err
	}
	w := e.reconcile(*spec.WorkerID, spec)
	return w.record(), nil
}

// PatchWorker updates the supplied fields of an existing worker and reconciles it like an upsert.
func (e *Engine) PatchWorker(id uint64, patch WorkerPatch) (WorkerRecord, error) {
	old, ok := e.workers[id]
	if !ok {
		return WorkerRecord{}, notFound("worker %d not found", id)
	}
	if err := checkSpec(&patch); err != nil {
		return WorkerRecord{}, err
	}
	s := old.spec // shallow copy; maps are replaced wholesale, never mutated
	mergePatch(&s, &patch)
	if err := e.admitWorker(id, PartitionKey{Model: *s.ModelName, Group: *s.RoutingGroup}); err != nil {
		return WorkerRecord{}, err
	}
	w := e.reconcile(id, s)
	return w.record(), nil
}

// DeleteWorker removes a worker: its index entries and bookings go, and the final record is
// returned with lifecycle "unschedulable".
func (e *Engine) DeleteWorker(id uint64) (WorkerRecord, error) {
	w, ok := e.workers[id]
	if !ok {
		return WorkerRecord{}, notFound("worker %d not found", id)
	}
	e.detach(w, nil)
	delete(e.workers, id)
	e.catalogGen++
	w.lifecycle = LifecycleUnschedulable
	return w.record(), nil
}

// Worker returns one catalog record.
func (e *Engine) Worker(id uint64) (WorkerRecord, bool) {
	w, ok := e.workers[id]
	if !ok {
		return WorkerRecord{}, false
	}
	return w.record(), true
}

// Workers lists catalog records sorted by (model_name, routing_group, worker_id); empty filters
// match everything.
func (e *Engine) Workers(model, group string) []WorkerRecord {
	out := make([]WorkerRecord, 0, len(e.workers))
	for _, w := range e.workers {
		if (model == "" || w.key.Model == model) && (group == "" || w.key.Group == group) {
			out = append(out, w.record())
		}
	}
	slices.SortFunc(out, func(a, b WorkerRecord) int {
		if c := (PartitionKey{a.ModelName, a.RoutingGroup}).Compare(PartitionKey{b.ModelName, b.RoutingGroup}); c != 0 {
			return c
		}
		return cmp.Compare(a.WorkerID, b.WorkerID)
	})
	return out
}

// SchedulableCount returns the number of schedulable workers in the whole catalog.
func (e *Engine) SchedulableCount() int {
	n := 0
	for _, w := range e.workers {
		if w.schedulable() {
			n++
		}
	}
	return n
}

// EventSource is one rank's KV-event subscription, as the service's listeners need it.
type EventSource struct {
	Owner          kvwire.Owner
	Partition      PartitionKey
	BlockSize      uint32
	Endpoint       string
	ReplayEndpoint string
}

// EventSources lists the subscriptions a schedulable worker needs (none when KV events are off).
func (e *Engine) EventSources(id uint64) []EventSource {
	w, ok := e.workers[id]
	if !ok || !w.schedulable() || !e.cfg.UseKVEvents {
		return nil
	}
	out := make([]EventSource, 0, w.dpSize())
	for r := w.startRank(); uint64(r) < uint64(w.startRank())+uint64(w.dpSize()); r++ {
		out = append(out, EventSource{
			Owner: kvwire.Owner{Worker: id, Rank: r}, Partition: w.key, BlockSize: w.blockSize(),
			Endpoint: w.eventEndpoints[r], ReplayEndpoint: deref(w.spec.ReplayEndpoint, ""),
		})
	}
	return out
}

// reconcile installs spec as worker id's record and returns the new worker.
func (e *Engine) reconcile(id uint64, spec WorkerSpec) *worker {
	e.catalogGen++
	w := &worker{
		id:   id,
		spec: spec,
		key:  PartitionKey{Model: *spec.ModelName, Group: *spec.RoutingGroup},
	}
	w.eventEndpoints = resolveEventEndpoints(w)
	w.hintSources = rankMap(spec.RouterHintSourceControlEndpoints)
	w.taints = make(map[string]struct{}, len(spec.Taints))
	for _, t := range spec.Taints {
		w.taints[t] = struct{}{}
	}
	w.reasons = missingMetadata(w, e.queueingFor(w.key.Model), e.cfg.UseKVEvents)

	var p *partition
	if len(w.reasons) == 0 {
		p = e.parts[w.key]
		eagle := deref(spec.IsEagle, false)
		switch {
		case p == nil:
			// Created below, once the worker is known to be valid.
		case len(p.members) == 0 || (len(p.members) == 1 && p.members[id] != nil):
			// The partition is empty, or the worker is alone in it: it may change the partition's
			// shape. Blocks indexed under another block size are meaningless then.
			if p.blockSize != w.blockSize() || p.isEagle != eagle {
				p.resetIndex(!e.cfg.UseKVEvents, e.cfg.PredictedTTL != nil)
			}
			p.blockSize, p.isEagle = w.blockSize(), eagle
		case p.blockSize != w.blockSize():
			w.reasons = append(w.reasons, fmt.Sprintf("reconciliation failed: block_size mismatch for %s: existing=%d requested=%d", w.key, p.blockSize, w.blockSize()))
		case p.isEagle != eagle:
			w.reasons = append(w.reasons, fmt.Sprintf("reconciliation failed: is_eagle mismatch for %s: existing=%t requested=%t", w.key, p.isEagle, eagle))
		}
	}
	if len(w.reasons) == 0 && e.cfg.UseKVEvents {
		w.reasons = append(w.reasons, endpointReasons(w)...)
	}

	old := e.workers[id]
	if old != nil {
		e.detach(old, w)
	}
	e.workers[id] = w
	if len(w.reasons) > 0 {
		w.lifecycle = LifecycleIncomplete
		return w
	}
	w.lifecycle = LifecycleSchedulable
	if p == nil {
		p = e.parts[w.key]
	}
	if p == nil {
		p = newPartition(w.key, w.blockSize(), deref(spec.IsEagle, false), !e.cfg.UseKVEvents, e.cfg.PredictedTTL != nil)
		p.tracker.SetContextShare(load.ContextShareOf(e.cfg.defaultSpeed()), e.cfg.LearnContextCost)
		e.parts[w.key] = p
		e.adoptRecovered(p)
	}
	p.members[id] = w
	e.seedSpeed(p, id)
	for r := w.startRank(); uint64(r) < uint64(w.startRank())+uint64(w.dpSize()); r++ {
		p.tracker.AddOwner(kvwire.Owner{Worker: id, Rank: r})
	}
	p.addCands(w) // incremental: O(log n) search + one splice (partition_cands.go)
	return w
}

// endpointReasons validates every listener endpoint (spec §3.4 step 7).
func endpointReasons(w *worker) []string {
	var reasons []string
	for _, r := range slices.Sorted(maps.Keys(w.eventEndpoints)) {
		if !w.hasRank(r) {
			continue
		}
		if err := ValidateZMQEndpoint(w.eventEndpoints[r]); err != nil {
			reasons = append(reasons, fmt.Sprintf("reconciliation failed: invalid kv_events endpoint for worker %d dp_rank %d: %v", w.id, r, err))
		}
	}
	if ep := deref(w.spec.ReplayEndpoint, ""); ep != "" {
		if err := ValidateZMQEndpoint(ep); err != nil {
			reasons = append(reasons, fmt.Sprintf("reconciliation failed: invalid replay endpoint for worker %d: %v", w.id, err))
		}
	}
	return reasons
}

// detach removes old from its partition before it is replaced by next (nil = deleted). State of
// ranks that next keeps in the same partition with unchanged endpoints survives: their index
// entries and bookings stay. Everything else of old is dropped.
func (e *Engine) detach(old, next *worker) {
	p := e.parts[old.key]
	if p == nil || p.members[old.id] != old {
		return
	}
	delete(p.members, old.id)
	keep := func(r uint32) (keepBlocks, keepLoad bool) {
		if next == nil || next.key != old.key || !next.schedulableCandidate() || !next.hasRank(r) {
			return false, false
		}
		same := old.eventEndpoints[r] == next.eventEndpoints[r] &&
			deref(old.spec.ReplayEndpoint, "") == deref(next.spec.ReplayEndpoint, "")
		return same || !e.cfg.UseKVEvents, true
	}
	for r := old.startRank(); uint64(r) < uint64(old.startRank())+uint64(old.dpSize()); r++ {
		o := kvwire.Owner{Worker: old.id, Rank: r}
		keepBlocks, keepLoad := keep(r)
		if !keepBlocks {
			p.index.ClearOwner(o)
			p.forgetOrder(o)
			if p.approx != nil {
				p.approx.dropOwner(o)
			}
			if p.predicted != nil {
				p.predicted.dropOwner(o)
			}
		}
		if !keepLoad {
			for _, id := range p.tracker.RemoveOwner(o) {
				if r := e.resv[id]; r != nil {
					p.releaseSession(r.session)
				}
				e.delRow(id)
			}
		}
	}
	// An emptied partition stays (spec §2.8: a partition exists once a valid worker registered in
	// it): /loads keeps listing it, a replayed reservation answers 503 and books once a worker
	// is back (spec §2.6), and the next worker may reshape it.
	p.dropCands(old.id)
}

// schedulableCandidate reports whether a freshly reconciled worker is about to become
// schedulable (reasons are computed before detach runs).
func (w *worker) schedulableCandidate() bool { return len(w.reasons) == 0 }

// mergePatch copies the supplied fields of p into s (maps and lists replaced wholesale).
func mergePatch(s, p *WorkerSpec) {
	patch(&s.Endpoint, p.Endpoint)
	patch(&s.KVEventsEndpoint, p.KVEventsEndpoint)
	patch(&s.ReplayEndpoint, p.ReplayEndpoint)
	patch(&s.StableRoutingID, p.StableRoutingID)
	patch(&s.KVTransferDomain, p.KVTransferDomain)
	patch(&s.KVTransferEnforcement, p.KVTransferEnforcement)
	patch(&s.RouterHintWorkerType, p.RouterHintWorkerType)
	patch(&s.KVEventSourceMode, p.KVEventSourceMode)
	patch(&s.BlockSize, p.BlockSize)
	patch(&s.DataParallelStartRank, p.DataParallelStartRank)
	patch(&s.DataParallelSize, p.DataParallelSize)
	patch(&s.MaxNumBatchedTokens, p.MaxNumBatchedTokens)
	patch(&s.TotalKVBlocks, p.TotalKVBlocks)
	patch(&s.IsEagle, p.IsEagle)
	patch(&s.KVTransferPreferredWeight, p.KVTransferPreferredWeight)
	patchMap(&s.KVEventsEndpoints, p.KVEventsEndpoints)
	patchMap(&s.TopologyDomains, p.TopologyDomains)
	patchMap(&s.RouterHintSourceControlEndpoints, p.RouterHintSourceControlEndpoints)
	if p.Taints != nil {
		s.Taints = p.Taints
	}
}

// patch sets *dst to src when the patch supplies it (non-nil).
func patch[T any](dst **T, src *T) {
	if src != nil {
		*dst = src
	}
}

// patchMap replaces *dst with src when the patch supplies it (non-nil).
func patchMap(dst *map[string]string, src map[string]string) {
	if src != nil {
		*dst = src
	}
}

// queueingFor reports whether router queueing applies to the model's partitions (and so whether
// its workers need max_num_batched_tokens).
func (e *Engine) queueingFor(model string) bool { return e.pol.forModel(model).queues() }
