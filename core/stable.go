package core

import "github.com/kvselect/kvselect/core/engine/load"

// WorkerLoadsByStableID returns the active load of every DP rank of the schedulable worker whose
// stable_routing_id is id in a partition whose model_name is model (for adapters that name
// workers by stable id, such as the AIBrix decision endpoint). ok is false when none exists.
func (s *Service) WorkerLoadsByStableID(model, id string) ([]load.RankLoad, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng.WorkerLoadsByStableID(model, id, nil)
}
