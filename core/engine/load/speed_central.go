package load

import "slices"

// The partition's central speed: what a typical rank of the partition has learned.
//
// Identical workers learn speeds that differ by noise (on a batching engine a busier rank
// batches more and measures faster; a rank whose cache churns undercounts its work), and a
// selector that prices each rank at its own noisy estimate feeds that noise back: the rank that
// looks faster gets more traffic, which is what made it look faster. The cost (engine's
// kvselectTerms.price) therefore prices every rank whose speed is close to the central one
// alike, and needs the central speed for it.

// centralSpeed caches the central speed between changes of any rank's speed or of the owner
// set. Invariant: when fresh and version equals the tracker's, model is the median described
// at CentralSpeed.
type centralSpeed struct {
	fresh   bool
	version uint64
	model   SpeedModel
	scratch []float64
}

// CentralSpeed is the median-B speed model among the live owners with at least
// TrustedSamples samples (the lower median for an even count; of the owners whose B is the
// median, the first in owner order), or the zero model when no owner has that many. It is
// recomputed, in O(n log n), only after a rank's published speed or the owner set changed;
// otherwise O(1). Deterministic: it depends on owner order only.
func (t *Tracker) CentralSpeed() SpeedModel {
	c := &t.central
	if c.fresh && c.version == t.version {
		return c.model
	}
	c.fresh, c.version, c.model = true, t.version, SpeedModel{}
	bs := c.scratch[:0]
	for _, slot := range t.order {
		if m := t.owners[slot].speed.published(); m.Valid() {
			bs = append(bs, m.B)
		}
	}
	c.scratch = bs
	if len(bs) == 0 {
		return c.model
	}
	slices.Sort(bs)
	med := bs[(len(bs)-1)/2]
	for _, slot := range t.order {
		if m := t.owners[slot].speed.published(); m.B == med {
			c.model = m
			break
		}
	}
	return c.model
}
