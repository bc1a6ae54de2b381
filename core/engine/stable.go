package engine

import (
	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/kvwire"
)

// stableIndex maps (model_name, stable_routing_id) to a schedulable worker, for adapters that
// name workers by their stable routing id (the AIBrix decision endpoint names candidates
// "namespace/pod"). It is derived from the catalog and rebuilt lazily when the catalog changed.
type stableIndex struct {
	gen   uint64
	built bool
	byKey map[stableKey]uint64
}

type stableKey struct{ model, id string }

// WorkerLoadsByStableID returns the active load of every DP rank (ascending) of the schedulable
// worker whose stable_routing_id is id in a partition whose model_name is model. When several
// routing groups hold such a worker, the lowest worker id wins. ok is false when none does.
func (e *Engine) WorkerLoadsByStableID(model, id string, dst []load.RankLoad) ([]load.RankLoad, bool) {
	if !e.stable.built || e.stable.gen != e.catalogGen {
		e.rebuildStable()
	}
	wid, ok := e.stable.byKey[stableKey{model, id}]
	if !ok {
		return dst, false
	}
	w := e.workers[wid]
	p := e.parts[w.key]
	if p == nil {
		return dst, false
	}
	for r := w.startRank(); uint64(r) < uint64(w.startRank())+uint64(w.dpSize()); r++ {
		dst = append(dst, p.tracker.Load(kvwire.Owner{Worker: wid, Rank: r}))
	}
	return dst, true
}

func (e *Engine) rebuildStable() {
	m := make(map[stableKey]uint64)
	for id, w := range e.workers {
		sid := deref(w.spec.StableRoutingID, "")
		if sid == "" || !w.schedulable() {
			continue
		}
		k := stableKey{w.key.Model, sid}
		if cur, ok := m[k]; !ok || id < cur {
			m[k] = id
		}
	}
	e.stable = stableIndex{gen: e.catalogGen, built: true, byKey: m}
}
