package core

import (
	"github.com/kvselect/kvselect/core/engine"
)

// prehashMin is the prompt size (tokens or hashes) from which hashing moves outside the lock.
// Below it the work (< ~10 µs) costs less than taking the lock a second time for the plan.
const prehashMin = 1024

// prepare checks a prompt against the per-request limits and, for a large prompt, hashes it
// outside the engine lock (engine/prehash.go): the partition's hashing plan is read under the
// lock in O(1), the hashing runs without it, and the engine uses the result when the
// partition is unchanged. An oversized prompt is refused here, before the lock (413).
func (s *Service) prepare(model, group *string, pr *engine.Prompt, o *engine.ConfigOverride) error {
	if err := engine.CheckPromptSize(s.cfg.Engine.Limits, pr); err != nil {
		s.tooLarge.Add(1)
		return err
	}
	if len(pr.TokenIDs) < prehashMin && len(pr.SequenceHashes) < prehashMin &&
		(pr.MMRoutingInfo == nil || len(pr.MMRoutingInfo.RoutingTokenIDs) < prehashMin) {
		return nil
	}
	key := engine.PartitionKey{Model: deref(model, engine.DefaultName), Group: deref(group, engine.DefaultName)}
	s.mu.Lock()
	plan := s.eng.HashPlan(key)
	s.mu.Unlock()
	s.eng.Prehash(plan, pr, o)
	return nil
}

func deref(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}
