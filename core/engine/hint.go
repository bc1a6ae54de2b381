package engine

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
	own := sel.pick.DeviceBlocks
	var best *scored
	for i := range sel.cands {
		s := &sel.cands[i]
		w := s.w
		if w == target && s.Owner.Rank == sel.pick.Owner.Rank {
			continue
		}
		if s.DeviceBlocks <= own || deref(w.spec.RouterHintWorkerType, "") != kind ||
			deref(w.spec.KVEventSourceMode, "") == "state_agent_v2" || w.hintSources[s.Owner.Rank] == "" {
			continue
		}
		if best == nil || s.DeviceBlocks > best.DeviceBlocks {
			best = s // candidates are sorted by (worker, rank): the first longest wins ties
		}
	}
	if best == nil {
		return nil
	}
	ext := best.w
	// The event index alone knows the source's engine hashes: a device overlap raised by the
	// predicted side index (predicted.go) has none for its predicted blocks, and a hint no
	// longer than the target's own prefix is pointless.
	hashes := sel.p.index.ExternalPrefix(best.Owner, sel.norm.block, int(best.DeviceBlocks), nil)
	if len(hashes) == 0 || len(hashes) <= int(own) {
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
