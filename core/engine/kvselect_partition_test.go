package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/core/engine/load"
	"github.com/kvselect/kvselect/kvwire"
)

// TestKVSelectAggregatesMatchScan: observeTracker (the fast path's O(1) read of the tracker's
// aggregates) leaves the kvselect terms exactly as observeRank over every rank in ordinal order
// (the general path) does, for miss_work_weight 0, non-dyadic, 1 and above 1 (the scanned
// case), on trackers with learned speeds and pending prefills.
func TestKVSelectAggregatesMatchScan(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	busySeen := 0
	for round := range 30 {
		tr := load.NewTracker()
		tr.SetDefaultSpeed(load.SpeedModel{A: 1e-4, B: 0.07, C: 3})
		nOwners := 1 + r.IntN(40)
		for w := range nOwners {
			tr.AddOwner(kvwire.Owner{Worker: uint64(w + 1)})
		}
		now := int64(0)
		for i := range 400 {
			o := kvwire.Owner{Worker: uint64(1 + r.IntN(nOwners))}
			id := fmt.Sprint(round, "-", i)
			noErr(t, tr.Add(load.Booking{ID: id, Owner: o, PrefillTokens: uint64(r.IntN(3000)), AdmittedAt: now}))
			if r.IntN(3) > 0 { // most complete, timed: speeds are learned
				now += int64(1+r.IntN(300)) * 1e6
				noErr(t, tr.PrefillCompleteAt(id, now))
			}
		}
		if tr.BusyOwners() > 0 {
			busySeen++
		}
		for _, mw := range []float64{0, 0.3, 1, 2.5} {
			w := weights{missWork: mw, robust: true}
			n := normalized{isl: 100}
			scan, fast := newKVSelectTerms(&n, 16, w), newKVSelectTerms(&n, 16, w)
			for i := range tr.Owners() {
				_, _, _, pending, _ := tr.CountersAt(i)
				scan.observeRank(tr.SpeedAt(i), pending)
			}
			fast.observeTracker(tr)
			if scan != fast {
				t.Fatalf("round %d, miss_work_weight %v: observeTracker %+v, observeRank scan %+v", round, mw, fast, scan)
			}
		}
	}
	if busySeen < 20 {
		t.Fatalf("weak workload: only %d of 30 trackers had a pending prefill", busySeen)
	}
}
