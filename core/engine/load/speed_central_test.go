package load

import (
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// learn gives o n samples at factor s of its prior (each of the prior's time for 1000 tokens).
func learn(tr *Tracker, o kvwire.Owner, n int, s float64) {
	learnWork(tr, o, n, tr.owners[tr.slots[o]].speed.est.prior.MS(1000), s)
}

// learnWork gives o n samples of work x (ms at its prior's speed) taking s·x, and publishes.
func learnWork(tr *Tracker, o kvwire.Owner, n int, x, s float64) {
	slot := tr.slots[o]
	st := &tr.owners[slot].speed
	for range n {
		st.est.observeWork(x, 0, s*x)
	}
	tr.publishSpeed(slot)
}

func TestCentralSpeedMedianOfLearnedRanks(t *testing.T) {
	tr := NewTracker()
	tr.SetDefaultSpeed(testPrior)
	if m := tr.CentralSpeed(); m != (SpeedModel{}) {
		t.Fatalf("empty tracker: central %+v, want zero", m)
	}
	var os []kvwire.Owner
	for w := uint64(1); w <= 5; w++ {
		o := kvwire.Owner{Worker: w}
		os = append(os, o)
		tr.AddOwner(o)
	}
	if m := tr.CentralSpeed(); m != (SpeedModel{}) {
		t.Fatalf("no rank learned: central %+v, want zero", m)
	}
	// Four ranks learned 2.2–2.8×, one 9× (a different GPU): the median is a typical rank's.
	for i, s := range []float64{2.8, 2.2, 9, 2.5} {
		learn(tr, os[i], 3*TrustedSamples, s)
	}
	// The fifth has too few samples to count.
	learn(tr, os[4], TrustedSamples-1, 0.5)
	got := tr.CentralSpeed()
	want := tr.Speed(os[3]).Model // 2.5×: the lower median of {2.2, 2.5, 2.8, 9}
	if got != want || got.B == testPrior.B {
		t.Fatalf("central %+v, want rank 4's %+v", got, want)
	}
	// The cache follows a speed change and an owner removal.
	learn(tr, os[4], 2, 0.5) // now enough samples, at ~0.5×: median of five is 2.5× still
	if got := tr.CentralSpeed(); got != want {
		t.Fatalf("after a fifth rank learned: central %+v, want %+v", got, want)
	}
	tr.RemoveOwner(os[3])
	tr.RemoveOwner(os[1])
	// {0.5, 2.8, 9}: the median is rank 1's.
	if got, want := tr.CentralSpeed(), tr.Speed(os[0]).Model; got != want {
		t.Fatalf("after removals: central %+v, want %+v", got, want)
	}
}

// TestSpeedPublishedOnceTrusted: a rank's estimate moves with its first sample, but what the
// cost reads — SpeedAt, RankLoad.Speed, SpeedSum — stays unknown until TrustedSamples samples,
// then is the estimate.
func TestSpeedPublishedOnceTrusted(t *testing.T) {
	tr := NewTracker()
	tr.SetDefaultSpeed(testPrior)
	a, b := kvwire.Owner{Worker: 1}, kvwire.Owner{Worker: 2}
	tr.AddOwner(a)
	tr.AddOwner(b)
	unknown := func(when string) {
		t.Helper()
		if sum, _, n := tr.SpeedSum(); n != 0 || sum != 0 {
			t.Fatalf("%s: SpeedSum %v over %d ranks, want none", when, sum, n)
		}
		for i, l := range tr.Loads(nil) {
			if tr.SpeedAt(i) != (SpeedModel{}) || l.Speed != (SpeedModel{}) {
				t.Fatalf("%s: rank %d published %+v / %+v, want unknown", when, i, tr.SpeedAt(i), l.Speed)
			}
		}
	}
	// Samples as a batching engine gives them: fifty short prefills merged into one, completed
	// in 0.15 of the prior's time for them.
	batch := 50 * testPrior.MS(500)
	batches := func(n int) { learnWork(tr, a, n, batch, 0.15) }
	unknown("no samples")
	batches(1)
	if est := tr.Speed(a); est.Samples != 1 || !(est.Model.B < 0.5*testPrior.B) {
		t.Fatalf("one batch at 0.15× the prior: estimate %+v, want it well below the prior", est)
	}
	unknown("one sample")
	batches(TrustedSamples - 2)
	unknown("one sample short of trusted")
	batches(1)
	est := tr.Speed(a).Model
	if got := tr.SpeedAt(0); got != est || tr.Loads(nil)[0].Speed != est {
		t.Fatalf("trusted: published %+v, want the estimate %+v", got, est)
	}
	if sum, _, n := tr.SpeedSum(); n != 1 || sum != est.B {
		t.Fatalf("trusted: SpeedSum %v over %d ranks, want %v over 1", sum, n, est.B)
	}
	if got := tr.SpeedAt(1); got != (SpeedModel{}) {
		t.Fatalf("the rank without samples published %+v, want unknown", got)
	}
}
