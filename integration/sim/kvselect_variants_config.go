package sim

import "github.com/kvselect/kvselect/core/engine"

// KVSelectPreviousConfig is kvselect's default before the KV-occupancy term (engine.Config's
// KVOccupancyWeight 0: a long request priced by no more than the pinned blocks it would
// overflow), with every partition priced as arrival-order (ReorderedMissSlowdown 0, as it then
// was): the "previous default" of README and cmd/kvselect-matrix/results.
// (Until then it was the default before the live-request term, ActiveRequestTokens 0: README at
// f2a34d2; before that the default before the decode term counted a shared prefix per running
// request, DecodeSharedPrefixOnce: README at fbef50a; before that the default before cache
// stickiness, CacheStickShare 0: README at e42ea8a; before that the default before the
// cold-cache discount: README at 0ea8f4c.)
func KVSelectPreviousConfig() engine.Config {
	c := KVSelectArrivalConfig()
	c.KVOccupancyWeight = 0
	return c
}

// KVSelectArrivalConfig is kvselect's default with every partition priced as arrival-order
// (engine.Config's ReorderedMissSlowdown 0): the default before a miss was priced for engines
// learned to reorder their queues (core/engine/kvselect_reorder.go). On engines that serve in
// arrival order it is the default bit for bit. The older variants below are built on it, as the
// defaults they stand for were.
func KVSelectArrivalConfig() engine.Config {
	c := KVSelectConfig()
	c.ReorderedMissSlowdown = 0
	return c
}

// KVSelectNoStickConfig is the default before cache stickiness (CacheStickShare 0, the decode
// term counting a shared prefix once, and no live-request or occupancy term, as it then was):
// the base of kvselect-evict and of the cold-cache test's "off".
func KVSelectNoStickConfig() engine.Config {
	c := KVSelectArrivalConfig()
	c.CacheStickShare, c.DecodeSharedPrefixOnce, c.ActiveRequestTokens = 0, true, 0
	c.KVOccupancyWeight = 0
	return c
}

// KVSelectCentralConfig is the default before RobustKVSelect and the pressure term (learned
// speed priced within 2× of a reference, β the partition's mean pending prefills capped at 1,
// no pressure, context, decode, live-request or occupancy term) with identical ranks priced at
// the partition's central learned speed (engine.Config.CentralPrefillSpeed): README, "Learned
// worker speed".
func KVSelectCentralConfig() engine.Config {
	c := KVSelectArrivalConfig()
	c.LearnContextCost, c.DecodeContextWeight, c.MissWorkWeight = false, 0, 1
	c.KVPressureWeight, c.RobustKVSelect, c.CentralPrefillSpeed, c.ColdCacheShare = 0, false, true, 0
	c.CacheStickShare, c.ActiveRequestTokens, c.KVOccupancyWeight = 0, 0, 0
	return c
}

// KVSelectEvictConfig is the default before cache stickiness with engine.Config's
// EvictionMissWork 1: the blocks a miss evicts priced at (1 + min(β, 1)) times their
// recompute, as the pressure term prices its overflow. Measured and not adopted (README, "An
// eviction's recompute priced for the requests it delays").
func KVSelectEvictConfig() engine.Config {
	c := KVSelectNoStickConfig()
	c.EvictionMissWork = 1
	return c
}
