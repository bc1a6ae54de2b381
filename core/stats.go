package core

import (
	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core/engine"
)

// Stats is a point-in-time snapshot of the service for metrics.
type Stats struct {
	Partitions        []engine.PartitionStats
	PendingSelections int
	KV                engine.KVApplyStats // cumulative KV-event application counters
	KVBatches         uint64              // batches applied
	KVUndecodable     uint64              // batches that failed to decode
	ListenersByStatus map[string]int      // nil when KV events are off
	Replication       *bus.Stats          // nil when replication is off
	Queue             QueueStats
}

// QueueStats describes the router queue (queue_wait.go).
type QueueStats struct {
	Pending    int            // requests parked now
	ByClass    map[string]int // requests parked now per policy class (pinned ones included)
	Dispatched uint64         // parked requests selected since start (successfully or not)
	Abandoned  uint64         // parked requests whose caller went away before dispatch
	WaitSecs   float64        // total time dispatched requests spent parked
}

// Stats returns a snapshot of the service's counters and sizes.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	st := Stats{
		Partitions:        s.eng.PartitionStats(),
		PendingSelections: s.eng.PendingSelections(),
		KV:                s.kvStats,
		KVBatches:         s.kvBatches,
		KVUndecodable:     s.kvUndecodable,
		Queue: QueueStats{Pending: s.eng.QueueLen(), ByClass: s.eng.QueueByClass(), Dispatched: s.queueStats.hist.n,
			Abandoned: s.queueStats.abandoned, WaitSecs: s.queueStats.hist.sum},
	}
	kv := s.kv
	s.mu.Unlock()
	if kv != nil {
		st.ListenersByStatus = kv.statusCounts()
	}
	if br, ok := s.repl.(*BusReplicator); ok {
		bs := br.Stats()
		st.Replication = &bs
	}
	return st
}
