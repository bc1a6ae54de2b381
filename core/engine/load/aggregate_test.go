package load

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// checkAggregates compares the maintained partition aggregates (aggregate.go) with a fresh scan
// through the public per-ordinal reads, SpeedSum bit for bit. checkInvariants calls it, so every
// harness run (property tests, FuzzOps) checks it after every step.
func (t *Tracker) checkAggregates() error {
	busy, pending, sum, sumK, n := 0, 0, 0.0, 0.0, 0
	for i := range t.Owners() {
		_, _, _, p, _ := t.CountersAt(i)
		pending += p
		if p > 0 {
			busy++
		}
		if sp := t.SpeedAt(i); sp.B > 0 {
			sum += sp.B
			sumK += sp.K
			n++
		}
	}
	if got := t.BusyOwners(); got != busy {
		return fmt.Errorf("BusyOwners %d, scan %d", got, busy)
	}
	if got := t.PendingPrefills(); got != pending {
		return fmt.Errorf("PendingPrefills %d, scan %d", got, pending)
	}
	if gs, gk, gn := t.SpeedSum(); math.Float64bits(gs) != math.Float64bits(sum) || math.Float64bits(gk) != math.Float64bits(sumK) || gn != n {
		return fmt.Errorf("SpeedSum %v (%x), K %v over %d, scan %v (%x), K %v over %d", gs, math.Float64bits(gs), gk, gn, sum, math.Float64bits(sum), sumK, n)
	}
	return nil
}

// TestAggregatesMatchScan: after every step of seeded random sequences of owners coming and
// going, bookings, timed and untimed prefill completions (the timed ones teach speeds), busy
// stretches long enough for a speed to be published, frees, expiry and prior changes,
// BusyOwners, PendingPrefills and SpeedSum equal a fresh scan. Priors are non-dyadic so that any
// reassociation of the speed sum would show in its last bits.
func TestAggregatesMatchScan(t *testing.T) {
	seeds, steps := 40, 600
	if testing.Short() {
		seeds = 10
	}
	// learned counts the owners whose speed is published (trusted): only those move SpeedSum.
	var learned, sumChanges, busyMax int
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 0xa66))
		tr := NewTracker()
		tr.SetDefaultSpeed(SpeedModel{A: 1e-4, B: 0.1, C: 3})
		owner := func() kvwire.Owner { return kvwire.Owner{Worker: uint64(1 + r.IntN(12)), Rank: uint32(r.IntN(2))} }
		for range 10 {
			tr.AddOwner(owner())
		}
		var ids []string
		id := func() string {
			if len(ids) == 0 || r.IntN(10) == 0 {
				return "unknown"
			}
			return ids[r.IntN(len(ids))]
		}
		now := int64(0)
		prevSum, prevK, _ := tr.SpeedSum()
		for step := range steps {
			switch op := r.IntN(103); {
			case op >= 100:
				// A busy stretch of back-to-back prefills on one owner, each timed near its
				// prior's estimate: enough samples for the owner's speed to be published.
				o := owner()
				for j := range TrustedSamples + 2 {
					b := Booking{ID: fmt.Sprint("s", step, "-", j), Owner: o, Hashes: chain([]uint64{9, uint64(step), uint64(j)}),
						PrefillTokens: uint64(500 + r.IntN(4000)), AdmittedAt: now}
					if tr.Add(b) != nil {
						break
					}
					now += int64((0.5+r.Float64())*tr.Speed(o).Model.MS(float64(b.PrefillTokens))*1e6) + 1
					_ = tr.PrefillCompleteAt(b.ID, now)
					_ = tr.Free(b.ID)
					if err := tr.checkAggregates(); err != nil {
						t.Fatalf("seed %d step %d stretch %d: %v", seed, step, j, err)
					}
				}
			case op < 4:
				tr.AddOwner(owner())
			case op < 6:
				tr.RemoveOwner(owner())
			case op < 40:
				b := Booking{ID: fmt.Sprint("b", step), Owner: owner(), Hashes: chain([]uint64{uint64(r.IntN(4)), uint64(step)}),
					PrefillTokens: uint64(r.IntN(3) * (1 + r.IntN(4000))), ContextTokens: uint64(r.IntN(2) * r.IntN(60000)), AdmittedAt: now}
				if tr.Add(b) == nil {
					ids = append(ids, b.ID)
				}
			case op < 65:
				// Timed: the interval since the owner's mark is a sample of its speed.
				now += int64(1+r.IntN(400)) * 1e6
				_ = tr.PrefillCompleteAt(id(), now)
			case op < 70:
				_ = tr.PrefillComplete(id())
			case op < 88:
				_ = tr.Free(id())
			case op < 92:
				tr.SetSpeedPrior(owner(), SpeedModel{A: 1e-4 * r.Float64(), B: 0.01 + r.Float64(), C: 3 * r.Float64()})
			case op < 96:
				tr.SetSpeedPrior(owner(), SpeedModel{A: math.NaN(), B: 1}) // invalid: ignored
			default:
				tr.Expire(now-int64(r.IntN(2000))*1e6, nil)
			}
			if err := tr.checkAggregates(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if s, k, _ := tr.SpeedSum(); s != prevSum || k != prevK {
				sumChanges++
				prevSum, prevK = s, k
			}
			busyMax = max(busyMax, tr.BusyOwners())
		}
		for _, o := range tr.ids {
			if tr.Speed(o).Samples >= TrustedSamples {
				learned++
			}
		}
		// Draining every booking leaves no owner busy and nothing pending.
		for _, id := range ids {
			_ = tr.Free(id)
		}
		if err := tr.checkAggregates(); err != nil || tr.BusyOwners() != 0 || tr.PendingPrefills() != 0 {
			t.Fatalf("seed %d: after drain: %v, %d busy, %d pending", seed, err, tr.BusyOwners(), tr.PendingPrefills())
		}
	}
	// The workload must have moved every aggregate, or the test proves nothing.
	if learned < seeds || sumChanges < 10*seeds || busyMax < 5 {
		t.Fatalf("weak workload: %d owners learned speeds, SpeedSum changed %d times, at most %d owners busy", learned, sumChanges, busyMax)
	}
	t.Logf("%d owners learned, SpeedSum changed %d times, up to %d owners busy", learned, sumChanges, busyMax)
}
