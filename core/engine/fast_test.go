package engine

// Differential test of the selection fast path (fast.go) against the general path: two engines
// with the same configuration and seed receive the same random operation stream; one may take
// the fast path, the other never does. After every operation the outcomes must be identical —
// responses (deep equality, including errors), replica and affinity effects, and the state of
// the random source (so tie-breaks consumed the same draws) — and after every fast selection
// the fast path's per-rank overlap, booked prefix and cost must equal the general path's scored
// candidates bit for bit. The workload is built to produce exact cost ties (few distinct
// prompts, equal loads) so that the tie-break draws are exercised.

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFastPathDifferential: the fast path decides exactly as the general path, for every cost
// policy and the configurations that change its arithmetic or its eligibility.
func TestFastPathDifferential(t *testing.T) {
	configs := differentialConfigs()
	steps := 1500
	if testing.Short() {
		steps = 400
	}
	for name, edit := range configs {
		t.Run(name, func(t *testing.T) {
			hits, ties, bound, stale, reordered := 0, 0, 0, 0, 0
			for seed := range uint64(4) {
				cfg := DefaultConfig()
				edit(&cfg)
				noErr(t, cfg.Validate())
				tw := newTwin(t, cfg, seed)
				tw.orderDrift = strings.HasSuffix(name, "_reorder")
				tw.run(steps)
				for _, st := range tw.fast.PartitionStats() {
					if st.QueueOrder.Reordered {
						reordered++
					}
				}
				hits += tw.fastHits
				ties += tw.ties
				bound += tw.boundHits
				stale += tw.staleDrops
			}
			if strings.HasSuffix(name, "_reorder") && reordered == 0 {
				t.Fatal("no partition learned to reorder: the reordered cost went untested")
			}
			if strings.HasSuffix(name, "sessions") && (bound < 20 || stale == 0) {
				t.Fatalf("weak session workload: %d fast selections met a binding, %d dropped a stale one", bound, stale)
			}
			if name == "temperature" {
				if hits != 0 {
					t.Fatalf("%d selections took the fast path at temperature > 0", hits)
				}
				return
			}
			if hits < 100 || ties < 20 {
				t.Fatalf("weak workload: %d fast selections, %d with tied minimum costs", hits, ties)
			}
			t.Logf("%d fast selections, %d decided among tied minimum costs, %d met a session binding (%d stale)", hits, ties, bound, stale)
		})
	}
}

// differentialConfigs are the configurations the differential tests run: both cost policies and
// everything that changes the fast path's arithmetic (decay, tier weights, odd weights, prefill
// tracking) or its eligibility and side paths (queueing, sessions, approximate index, busy
// flags, temperature, which never takes the fast path).
func differentialConfigs() map[string]func(*Config) {
	return map[string]func(*Config){
		"dynamo":   func(*Config) {},
		"kvselect": func(c *Config) { *c = KVSelectDefaults() },
		// miss_work_weight not dyadic (the saturation's product must match on both paths), and
		// above 1 (the saturation is then scanned; kvselect_partition.go).
		"kvselect_odd_miss_work":  func(c *Config) { *c = KVSelectDefaults(); c.MissWorkWeight = 0.3 },
		"kvselect_high_miss_work": func(c *Config) { *c = KVSelectDefaults(); c.MissWorkWeight = 2.5 },
		// The eviction priced for the requests its recompute delays (not dyadic either).
		"kvselect_evict_miss_work": func(c *Config) { *c = KVSelectDefaults(); c.EvictionMissWork = 0.7 },
		// Cache stickiness at a low share (the sticky set is most ranks holding a little) and
		// off (the cost alone): the default's 0.3 is in every kvselect config above.
		"kvselect_stick_low": func(c *Config) { *c = KVSelectDefaults(); c.CacheStickShare = 0.2 },
		"kvselect_stick_off": func(c *Config) { *c = KVSelectDefaults(); c.CacheStickShare = 0 },
		// The decode term reading a shared prefix once (its active blocks), not per request.
		"kvselect_decode_once": func(c *Config) { *c = KVSelectDefaults(); c.DecodeSharedPrefixOnce = true },
		// The live-request term at a weight that is not dyadic, and off.
		"kvselect_odd_requests": func(c *Config) { *c = KVSelectDefaults(); c.ActiveRequestTokens = 37.3 },
		"kvselect_requests_off": func(c *Config) { *c = KVSelectDefaults(); c.ActiveRequestTokens = 0 },
		// The occupancy term alone reading the capacity (pressure off), ungated at a weight that is
		// not dyadic, and off.
		"kvselect_occupancy_only": func(c *Config) { *c = KVSelectDefaults(); c.KVPressureWeight = 0 },
		"kvselect_occupancy_ungated": func(c *Config) {
			*c = KVSelectDefaults()
			c.KVOccupancyWeight, c.KVOccupancyMinShare = 0.7, 0
		},
		"kvselect_occupancy_off": func(c *Config) { *c = KVSelectDefaults(); c.KVOccupancyWeight = 0 },
		// Reordered-miss pricing at a slowdown that is not dyadic (the workload's random
		// completion order teaches reordering: checked), and off.
		"kvselect_odd_reorder": func(c *Config) { *c = KVSelectDefaults(); c.ReorderedMissSlowdown = 0.7 },
		"kvselect_reorder_off": func(c *Config) { *c = KVSelectDefaults(); c.ReorderedMissSlowdown = 0 },
		// A context prior (share 0.8, held): every rank's K > 0, so both paths price the pending
		// prefills' cross products (load.RankLoad.PrefillCross) and the request's own context.
		"kvselect_context": func(c *Config) {
			*c = KVSelectDefaults()
			c.PrefillModelK, c.LearnContextCost = 0.8*2*c.PrefillModelA, false
		},
		"kvselect_tiers": func(c *Config) {
			*c = KVSelectDefaults()
			c.HostCacheHitWeight, c.DiskCacheHitWeight, c.DecodeActiveRequestWeight = 0.5, 0.25, 0.3
		},
		"decay": func(c *Config) { c.OverlapScoreCreditDecay = 0.5 },
		// Weights that are not dyadic fractions: any reassociation of the arithmetic changes bits.
		"odd_weights": func(c *Config) {
			c.OverlapScoreCredit, c.PrefillLoadScale, c.DecodeActiveRequestWeight, c.OverlapScoreCreditDecay = 0.7, 1.1, 0.3, 0.13
		},
		"odd_weights_no_decay": func(c *Config) {
			c.OverlapScoreCredit, c.PrefillLoadScale, c.DecodeActiveRequestWeight = 0.7, 1.1, 0.3
		},
		"tiers_weights": func(c *Config) {
			c.HostCacheHitWeight, c.DiskCacheHitWeight, c.DecodeActiveRequestWeight = 0.5, 0.25, 1.5
		},
		"no_prefill": func(c *Config) { c.TrackPrefillTokens = false },
		"queueing":   func(c *Config) { c.QueueThreshold = ptr(0.5) },
		"sessions":   func(c *Config) { c.SessionAffinityTTL, c.SessionAffinityMode = time.Minute, SessionAffinitySoft },
		"sessions_hard": func(c *Config) {
			c.SessionAffinityTTL, c.SessionAffinityMode = time.Minute, SessionAffinityHard
		},
		"kvselect_sessions": func(c *Config) {
			*c = KVSelectDefaults()
			c.SessionAffinityTTL, c.SessionAffinityMode = time.Minute, SessionAffinitySoft
		},
		"approximate": func(c *Config) { c.UseKVEvents = false },
		"predicted":   func(c *Config) { c.PredictedTTL = ptr(30 * time.Second) },
		"kvselect_predicted": func(c *Config) {
			*c = KVSelectDefaults()
			c.PredictedTTL = ptr(30 * time.Second)
		},
		"busy_flags":  func(c *Config) { c.DecodeBusyThreshold, c.PrefillBusyThreshold = ptr(0.01), ptr(0.01) },
		"temperature": func(c *Config) { c.Temperature = 0.3 }, // never fast: checks the fallback
	}
}

// FuzzFastPathDifferential runs the twin engines on a fuzzed seed and configuration: any
// workload the generator can draw must leave fast and general paths in agreement.
func FuzzFastPathDifferential(f *testing.F) {
	f.Add(uint64(1), uint8(0))
	f.Add(uint64(99), uint8(5))
	names := slices.Sorted(maps.Keys(differentialConfigs()))
	f.Fuzz(func(t *testing.T, seed uint64, which uint8) {
		cfg := DefaultConfig()
		differentialConfigs()[names[int(which)%len(names)]](&cfg)
		newTwin(t, cfg, seed).run(200)
	})
}
