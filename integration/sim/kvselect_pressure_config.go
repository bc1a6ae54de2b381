package sim

import "github.com/kvselect/kvselect/core/engine"

// KVSelectPressureConfig is kvselect's default policy with the pinned-KV pressure term at its
// principled weight (kv_pressure_weight 1: overflow priced as recompute; the default since the
// consensus speed pricing, so this sets it explicitly) and the opt-in decode term at the
// physics-derived ratio for an 8B-class model on one H100 (decode_context_weight 1e-3). See core/engine/kvselect_pressure.go, kvselect_decode.go
// and README, "Pinned-KV pressure and decode load".
func KVSelectPressureConfig() engine.Config {
	c := KVSelectConfig()
	c.KVPressureWeight, c.DecodeContextWeight = 1, 1e-3
	return c
}
