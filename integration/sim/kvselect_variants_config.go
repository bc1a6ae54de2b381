package sim

import "github.com/kvselect/kvselect/core/engine"

// KVSelectPreviousConfig is kvselect's default before the decode term (engine.Config's
// DecodeContextWeight 0: a rank full of running contexts is priced by its prefill queue
// alone): the "previous default" of README and cmd/kvselect-matrix/results.
func KVSelectPreviousConfig() engine.Config {
	c := KVSelectConfig()
	c.DecodeContextWeight = 0
	return c
}

// KVSelectCentralConfig is the default before RobustKVSelect and the pressure term (learned
// speed priced within 2× of a reference, β the partition's mean pending prefills, no pressure,
// context or decode term) with identical ranks priced at the partition's central learned speed
// (engine.Config.CentralPrefillSpeed): README, "Learned worker speed".
func KVSelectCentralConfig() engine.Config {
	c := KVSelectConfig()
	c.LearnContextCost, c.DecodeContextWeight = false, 0
	c.KVPressureWeight, c.RobustKVSelect, c.CentralPrefillSpeed = 0, false, true
	return c
}
