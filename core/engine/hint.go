package engine

import "github.com/kvselect/kvselect/kvwire"

// kvHint builds the optional kv_hint of a booking (spec §9): when another rank of the same
// router_hint_worker_type holds a strictly longer device prefix than the chosen rank and
// advertises a source control endpoint for its DP rank, the target is told where to fetch it.
// Best source = longest prefix; ties → lowest (worker, rank). Only with an event-fed index.
func (e *Engine) kvHint(sel *selection, id string) *KVHint {
	if !e.cfg.UseKVEvents || len(sel.norm.block) == 0 {
		return nil
	}
	target := sel.pick.w
	kind := deref(target.spec.RouterHintWorkerType, "")
	if kind == "" {
		return nil
	}
	// The target's own prefix counts predicted blocks (predicted.go: a booking is computing
	// them); a source's counts only what KV events confirmed, since only those blocks have the
	// engine hashes a fetch names.
	own := sel.pick.DeviceBlocks
	confirmed := func(s *scored) int32 { return s.DeviceBlocks }
	if sel.p.predicted != nil {
		ev := map[kvwire.Owner]int32{}
		sel.p.index.Match(sel.norm.block, &e.scratch.match)
		for _, m := range e.scratch.match.Owners {
			ev[m.Owner] = m.Device
		}
		confirmed = func(s *scored) int32 { return ev[s.Owner] }
	}
	var best *scored
	var bestLen int32
	for i := range sel.cands {
		s := &sel.cands[i]
		w := s.w
		if w == target && s.Owner.Rank == sel.pick.Owner.Rank {
			continue
		}
		n := confirmed(s)
		if n <= own || deref(w.spec.RouterHintWorkerType, "") != kind ||
			deref(w.spec.KVEventSourceMode, "") == "state_agent_v2" || w.hintSources[s.Owner.Rank] == "" {
			continue
		}
		if best == nil || n > bestLen {
			best, bestLen = s, n // candidates are sorted by (worker, rank): the first longest wins ties
		}
	}
	if best == nil {
		return nil
	}
	ext := best.w
	hashes := sel.p.index.ExternalPrefix(best.Owner, sel.norm.block, int(bestLen), nil)
	if len(hashes) == 0 {
		return nil
	}
	return &KVHint{
		ProtocolVersion: "0.1",
		MessageID:       id,
		Actions: []KVHintAction{{
			ActionID: "a1", ActionType: "kv.fetch", ActionVersion: "1.0",
			Payload: KVHintPayload{SourceControlEndpoint: ext.hintSources[best.Owner.Rank], BlockHashes: toI64(hashes)},
		}},
	}
}
