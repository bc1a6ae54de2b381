package engine

import (
	"math"
	"testing"
)

// TestEvictionMissWork checks the eviction term's miss-work factor (Config.EvictionMissWork):
// with the cap on, a rank's eviction is priced (1 + min(β, cap)) times — twice at cap 1 on a
// rank with pending prefills, once on an idle rank of an idle partition (β = 0) — and with it
// off (the default) once, whatever the load.
func TestEvictionMissWork(t *testing.T) {
	const isl, occ = 4096.0, 0.5
	cost := func(cap float64, pending int) (withOcc, without float64) {
		cfg := KVSelectDefaults()
		cfg.FixedPrefillModel, cfg.KVPressureWeight, cfg.DecodeContextWeight = true, 0, 0
		cfg.EvictionMissWork = cap
		w := weightsOf(&cfg)
		k := newKVSelectTerms(&normalized{isl: isl}, 16, w)
		k.observeRank(w.prior, pending)
		for _, o := range []float64{occ, 0} {
			c := k.costOf(0, 0, 0, 0, o, w.prior, 1000, 1000*1000, 0, pending, pending, 0, 0, 0, 0)
			if o > 0 {
				withOcc = c
			} else {
				without = c
			}
		}
		return withOcc, without
	}
	defaults := KVSelectDefaults()
	prior := weightsOf(&defaults).prior
	evict := occ * (prior.MS(isl) - prior.C) // eviction_weight 1
	for _, c := range []struct {
		name    string
		cap     float64
		pending int
		factor  float64
	}{
		{"off, busy rank", 0, 3, 1},
		{"off, idle rank", 0, 0, 1},
		{"cap 1, busy rank (β 3)", 1, 3, 2},
		{"cap 0.5, busy rank", 0.5, 3, 1.5},
		{"cap 1, idle rank of an idle partition (β 0)", 1, 0, 1},
	} {
		with, without := cost(c.cap, c.pending)
		if got, want := with-without, c.factor*evict; math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: eviction priced %.6f ms, want %.6f (%.2f × %.6f)", c.name, got, want, c.factor, evict)
		}
	}
}
