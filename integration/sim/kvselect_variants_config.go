package sim

import "github.com/kvselect/kvselect/core/engine"

// KVSelectPreviousConfig is kvselect's default before a miss's β could exceed 1
// (engine.Config's MissWorkWeight 1: a miss on a rank with twenty pending prefills priced as on
// one with one; the saturation and the pressure term are then as they are now): the "previous
// default" of README and cmd/kvselect-matrix/results.
func KVSelectPreviousConfig() engine.Config {
	c := KVSelectConfig()
	c.MissWorkWeight = 1
	return c
}

// KVSelectCentralConfig is the default before RobustKVSelect and the pressure term (learned
// speed priced within 2× of a reference, β the partition's mean pending prefills capped at 1,
// no pressure, context or decode term) with identical ranks priced at the partition's central
// learned speed (engine.Config.CentralPrefillSpeed): README, "Learned worker speed".
func KVSelectCentralConfig() engine.Config {
	c := KVSelectConfig()
	c.LearnContextCost, c.DecodeContextWeight, c.MissWorkWeight = false, 0, 1
	c.KVPressureWeight, c.RobustKVSelect, c.CentralPrefillSpeed = 0, false, true
	return c
}
