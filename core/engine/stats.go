package engine

// PartitionStats describes one partition's size, for metrics and operators.
type PartitionStats struct {
	Key          PartitionKey
	BlockSize    uint32
	Workers      int // members (schedulable or not)
	Ranks        int // schedulable (worker, rank) candidates
	IndexNodes   int
	IndexEntries int // indexed (block, owner) pairs
	IndexBytes   int
	Bookings     int // live bookings, local and mirrored
	Sessions     int // session bindings
	Quality      RoutingQuality
	// PrefillSpeeds is every rank's learned prefill speed, in (worker, rank) order (speed.go).
	PrefillSpeeds []PrefillSpeed
	// ContextShare is the partition's learned context share κ (load/speed_context.go): K in
	// units of the prior's attention cost per pair, 0 while unlearned or on an engine that does
	// not pay for cached context.
	ContextShare float64
	// QueueOrder is the partition's learned queue discipline (load/order.go; kvselect_reorder.go).
	QueueOrder QueueOrder
}

// PartitionStats returns every partition's statistics, sorted by key.
func (e *Engine) PartitionStats() []PartitionStats {
	out := make([]PartitionStats, 0, len(e.parts))
	for _, k := range e.DumpPartitionKeys() {
		p := e.parts[k]
		is := p.index.Stats()
		out = append(out, PartitionStats{
			Key: k, BlockSize: p.blockSize, Workers: len(p.members), Ranks: len(p.cands),
			IndexNodes: is.Nodes, IndexEntries: is.Entries, IndexBytes: is.Bytes,
			Bookings: p.tracker.Len(), Sessions: len(p.sessions), Quality: p.quality,
			PrefillSpeeds: p.prefillSpeeds(), ContextShare: p.tracker.ContextShare(),
			QueueOrder: queueOrderOf(p.tracker),
		})
	}
	return out
}
