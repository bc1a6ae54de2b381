package sim

import "github.com/kvselect/kvselect/core/engine"

// KVSelectPreviousConfig is kvselect's default before cache stickiness (engine.Config's
// CacheStickShare 0: the cost alone decides where a mostly cached prompt goes): the "previous
// default" of README and cmd/kvselect-matrix/results. (Until stickiness it was the default
// before the cold-cache discount, ColdCacheShare 0: README at 0ea8f4c.)
func KVSelectPreviousConfig() engine.Config {
	c := KVSelectConfig()
	c.CacheStickShare = 0
	return c
}

// KVSelectCentralConfig is the default before RobustKVSelect and the pressure term (learned
// speed priced within 2× of a reference, β the partition's mean pending prefills capped at 1,
// no pressure, context or decode term) with identical ranks priced at the partition's central
// learned speed (engine.Config.CentralPrefillSpeed): README, "Learned worker speed".
func KVSelectCentralConfig() engine.Config {
	c := KVSelectConfig()
	c.LearnContextCost, c.DecodeContextWeight, c.MissWorkWeight = false, 0, 1
	c.KVPressureWeight, c.RobustKVSelect, c.CentralPrefillSpeed, c.ColdCacheShare = 0, false, true, 0
	c.CacheStickShare = 0
	return c
}

// KVSelectEvictConfig is the default before cache stickiness with engine.Config's
// EvictionMissWork 1: the blocks a miss evicts priced at (1 + min(β, 1)) times their
// recompute, as the pressure term prices its overflow. Measured and not adopted (README, "An
// eviction's recompute priced for the requests it delays").
func KVSelectEvictConfig() engine.Config {
	c := KVSelectPreviousConfig()
	c.EvictionMissWork = 1
	return c
}
