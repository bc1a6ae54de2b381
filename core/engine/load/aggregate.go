package load

import "math"

// Partition aggregates over every live owner, for the selection cost (the engine's kvselect
// policy: its consensus speed and its saturation, kvselect_speed.go and kvselect_cost.go). A
// selection prices every rank against them, so reading them by a scan of the owners before the
// cost pass doubled the tracker reads of every selection; the tracker keeps them instead:
//
//   - PendingPrefills (tracker.go) and BusyOwners are counters updated where an owner's pending
//     count changes (Add, dropPrefill; RemoveOwner frees through dropPrefill): O(1), exact.
//   - SpeedSum is a float sum, which maintained by adding and subtracting would drift from a
//     fresh left-to-right sum in its last bits. It is cached instead, and recomputed by a scan of
//     the dense speeds array when it is read after a published B changed or the owner set did.
//     Published speeds are quantised (speed.go, quantum), so they change rarely: never on a
//     select-only workload, at most once per learned sample otherwise.
//
// What it saves is measured at the reader, the engine's kvselectTerms.observeTracker
// (kvselect_partition.go): −12 to −20 % thread CPU per selection at 64 and 256 workers.

// BusyOwners returns the number of live owners with at least one pending prefill (those whose
// RankLoad.PendingPrefills ≥ 1). Cost O(1).
func (t *Tracker) BusyOwners() int { return t.busy }

// speedSum caches SpeedSum. Invariant: when fresh and version equals the tracker's, sum and n
// are what SpeedSum's scan returns for the current speeds.
type speedSum struct {
	fresh   bool
	version uint64
	sum     float64
	sumK    float64
	n       int
}

// SpeedSum returns the sum of the per-token costs B of the owners' published speed models
// (SpeedAt: trusted ones only) that are positive, added left to right in ordinal order in
// float64, the sum of those models' context coefficients K, and how many there are: bit for bit
// the sums of a fresh loop `for i := range Owners() { if sp := SpeedAt(i); sp.B > 0 { sum += sp.B; sumK +=
// sp.K; n++ } }`. It is recomputed, in O(owners), only after a published speed's B or K or the
// owner set changed; otherwise O(1).
func (t *Tracker) SpeedSum() (sum, sumK float64, n int) {
	c := &t.speedSum
	if !c.fresh || c.version != t.version {
		c.fresh, c.version, c.sum, c.sumK, c.n = true, t.version, 0, 0, 0
		for i := range t.speeds {
			if sp := &t.speeds[i]; sp.B > 0 {
				c.sum += sp.B
				c.sumK += sp.K
				c.n++
			}
		}
	}
	return c.sum, c.sumK, c.n
}

// publishSpeed copies slot's published model (speedState.published) into the ordinal-indexed
// speeds, and invalidates the caches that depend on it: CentralSpeed always (it also counts
// samples), SpeedSum when B or K changed.
func (t *Tracker) publishSpeed(slot uint32) {
	sp := &t.speeds[t.ord[slot]]
	cur := t.owners[slot].speed.published()
	if math.Float64bits(sp.B) != math.Float64bits(cur.B) || math.Float64bits(sp.K) != math.Float64bits(cur.K) {
		t.speedSum.fresh = false
	}
	*sp = cur
	t.central.fresh = false
}
