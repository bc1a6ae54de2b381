package sim

import "github.com/kvselect/kvselect/core/engine"

// KVSelectPreviousConfig is kvselect's default before the cold-cache discount
// (engine.Config's ColdCacheShare 0: a miss's eviction priced by the rank's occupancy alone,
// however little its cache has been used lately): the "previous default" of README and
// cmd/kvselect-matrix/results. (Until the discount it was the default before a miss's β could
// exceed 1, MissWorkWeight 1: README at 64bddbd.)
func KVSelectPreviousConfig() engine.Config {
	c := KVSelectConfig()
	c.ColdCacheShare = 0
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
	return c
}

// KVSelectEvictConfig is the default with engine.Config's EvictionMissWork 1: the blocks a miss
// evicts priced at (1 + min(β, 1)) times their recompute, as the pressure term prices its
// overflow. Measured and not adopted (README, "An eviction's recompute priced for the requests
// it delays").
func KVSelectEvictConfig() engine.Config {
	c := KVSelectConfig()
	c.EvictionMissWork = 1
	return c
}
