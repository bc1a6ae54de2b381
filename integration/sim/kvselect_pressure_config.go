package sim

import "github.com/kvselect/kvselect/core/engine"

// KVSelectPressureConfig is kvselect's default policy with both extra terms of its cost on:
// the pinned-KV pressure term at its principled weight (kv_pressure_weight 1, the default:
// overflow priced as recompute) and the decode term at the physics-derived ratio for an 8B-class model on one
// H100 (decode_context_weight 1e-3). See core/engine/kvselect_pressure.go, kvselect_decode.go
// and README, "Pinned-KV pressure and decode load".
func KVSelectPressureConfig() engine.Config {
	c := KVSelectConfig()
	c.KVPressureWeight, c.DecodeContextWeight = 1, 1e-3
	return c
}

// KVSelectPreviousConfig is kvselect's default before the learned context cost
// (engine.Config.LearnContextCost off: cached context is free, as in the Dynamo mocker's
// polynomial): the "previous default" of README and cmd/kvselect-matrix/results.
func KVSelectPreviousConfig() engine.Config {
	c := KVSelectConfig()
	c.LearnContextCost = false
	return c
}

// KVSelectCentralConfig is the default before RobustKVSelect and the pressure term (learned
// speed priced within 2× of a reference, β the partition's mean pending prefills, no pressure
// term, no context cost) with identical ranks priced at the partition's central learned speed
// (engine.Config.CentralPrefillSpeed): README, "Learned worker speed".
func KVSelectCentralConfig() engine.Config {
	c := KVSelectPreviousConfig()
	c.KVPressureWeight, c.RobustKVSelect, c.CentralPrefillSpeed = 0, false, true
	return c
}
