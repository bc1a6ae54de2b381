package engine

import (
	"slices"
)

// Catalog bounds: MaxWorkers and MaxPartitions. A registration that would exceed them is
// refused with ErrTableFull (507) and changes nothing. Partitions outlive their workers (spec
// §2.8), so when the partition table is full an empty one (no members, no bookings, nothing
// recovered for it) is reclaimed first, the smallest key first (deterministic); only when none
// is empty is the registration refused.

// admitWorker checks the catalog bounds for a registration of id into key.
func (e *Engine) admitWorker(id uint64, key PartitionKey) error {
	if _, known := e.workers[id]; !known && len(e.workers) >= e.lim.MaxWorkers {
		e.bounds.RejectedWorkers++
		return tableFull("%d workers are registered: the limit is %d (--max-workers); delete workers first", len(e.workers), e.lim.MaxWorkers)
	}
	if _, ok := e.parts[key]; ok || len(e.parts) < e.lim.MaxPartitions {
		return nil
	}
	if e.reclaimEmptyPartition(key) {
		return nil
	}
	e.bounds.RejectedPartitions++
	return tableFull("%d partitions exist: the limit is %d (--max-partitions); %s would be a new one", len(e.parts), e.lim.MaxPartitions, key)
}

// reclaimEmptyPartition deletes the smallest-keyed partition that holds nothing (other than
// keep's). It reports whether one was deleted.
func (e *Engine) reclaimEmptyPartition(keep PartitionKey) bool {
	var empty []PartitionKey
	for k, p := range e.parts {
		if k != keep && len(p.members) == 0 && p.tracker.Len() == 0 && len(p.sessions) == 0 {
			empty = append(empty, k)
		}
	}
	if len(empty) == 0 {
		return false
	}
	k := slices.MinFunc(empty, PartitionKey.Compare)
	delete(e.parts, k)
	e.catalogGen++
	e.bounds.ReclaimedPartitions++
	return true
}
