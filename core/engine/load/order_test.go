package load

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// orderWorker books n requests on o, 40 ms apart, half of them hits (20–50 ms of service) and
// half misses (0.2–2 s), and completes their prefills one at a time: in arrival order when lpm
// is false (a FIFO worker; every fourth request finishes in the step of the one before it, and
// the caller reports the younger of the two 5 ms first), otherwise with every hit that has
// arrived served ahead of the misses waiting, as a longest-prefix-match engine does.
func orderWorker(t *testing.T, tr *Tracker, o kvwire.Owner, n int, lpm bool, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	type req struct {
		id        string
		at, svc   float64
		hit, done bool
	}
	reqs := make([]req, n)
	for i := range reqs {
		hit := rng.IntN(2) == 0
		svc := 200 + rng.Float64()*1800
		if hit {
			svc = 20 + rng.Float64()*30
		}
		reqs[i] = req{id: fmt.Sprintf("o%d-%d", o.Worker, i), at: float64(i) * 40, svc: svc, hit: hit}
		if err := tr.Add(Booking{ID: reqs[i].id, Owner: o, PrefillTokens: 100, AdmittedAt: int64(reqs[i].at * 1e6)}); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(id string, at float64) {
		t.Helper()
		if err := tr.PrefillCompleteAt(id, int64(at*1e6)); err != nil {
			t.Fatal(err)
		}
	}
	now := 0.0
	if !lpm {
		for i := 0; i < n; i++ {
			now = max(now, reqs[i].at) + reqs[i].svc
			if i%4 == 2 && i+1 < n && reqs[i+1].at <= now {
				complete(reqs[i+1].id, now) // the same step's younger request, reported first
				complete(reqs[i].id, now+5)
				i++
				continue
			}
			complete(reqs[i].id, now)
		}
		return
	}
	for served := 0; served < n; served++ {
		next := -1 // the oldest waiting request, or the oldest waiting hit
		for i := range reqs {
			r := &reqs[i]
			if r.done || next >= 0 && (r.at > now || !r.hit || reqs[next].hit) {
				continue
			}
			next = i
		}
		r := &reqs[next]
		now = max(now, r.at) + r.svc
		r.done = true
		complete(r.id, now)
	}
}

// TestReorderShareLearnsTheDiscipline: an engine that serves in arrival order teaches a share
// of 0 (completions a step apart within the slack are not overtakes) and is not reordered; one
// that serves hits ahead of waiting misses teaches a share well above ReorderedShare and is.
func TestReorderShareLearnsTheDiscipline(t *testing.T) {
	for _, lpm := range []bool{false, true} {
		o := kvwire.Owner{Worker: 1}
		tr := newTestTracker(t, o)
		orderWorker(t, tr, o, 400, lpm, 1)
		share, n := tr.ReorderShare()
		t.Logf("lpm %v: overtaken share %.3f over %d samples", lpm, share, n)
		if n < 300 {
			t.Fatalf("lpm %v: %d samples of 400 queued completions", lpm, n)
		}
		if !lpm && (share != 0 || tr.Reordered()) {
			t.Fatalf("arrival order: share %v, reordered %v", share, tr.Reordered())
		}
		if lpm && (share < 2*ReorderedShare || !tr.Reordered()) {
			t.Fatalf("hits served first: share %v, reordered %v", share, tr.Reordered())
		}
	}
}

// TestReorderSamples: what counts as a sample, an overtake, and when Reordered answers.
func TestReorderSamples(t *testing.T) {
	o := kvwire.Owner{Worker: 1}
	tr := newTestTracker(t, o)
	ms := func(v float64) int64 { return int64(v * 1e6) }
	add := func(id string, at float64, prefill uint64) {
		t.Helper()
		if err := tr.Add(Booking{ID: id, Owner: o, PrefillTokens: prefill, AdmittedAt: ms(at)}); err != nil {
			t.Fatal(err)
		}
	}
	done := func(id string, at float64) {
		t.Helper()
		if err := tr.PrefillCompleteAt(id, ms(at)); err != nil {
			t.Fatal(err)
		}
	}
	// A lone booking's completion has no younger one on its rank: no sample.
	add("a", 0, 10)
	done("a", 100)
	if _, n := tr.ReorderShare(); n != 0 {
		t.Fatalf("lone completion gave %d samples", n)
	}
	// b, then c: c completes first by more than the slack, so b was overtaken; c's own
	// completion had no younger booking.
	add("b", 200, 10)
	add("c", 210, 10)
	done("c", 300)
	done("b", 300+OvertakeSlack/1e6+1)
	if share, n := tr.ReorderShare(); n != 1 || share != 1 {
		t.Fatalf("overtaken: share %v over %d samples, want 1 over 1", share, n)
	}
	// d, then e completing within the slack before d: a step's completions, not an overtake.
	add("d", 1000, 10)
	add("e", 1010, 10)
	done("e", 1100)
	done("d", 1100+OvertakeSlack/1e6-1)
	if share, n := tr.ReorderShare(); n != 2 || share != 0.5 {
		t.Fatalf("tie: share %v over %d samples, want 0.5 over 2", share, n)
	}
	// A booking without tracked prefill is neither a younger booking nor a sample; an untimed
	// completion is no sample either.
	add("f", 2000, 10)
	add("g", 2010, 0)
	done("g", 2020)
	done("f", 5000)
	add("h", 6000, 10)
	add("i", 6010, 10)
	if err := tr.PrefillComplete("h"); err != nil {
		t.Fatal(err)
	}
	if _, n := tr.ReorderShare(); n != 2 {
		t.Fatalf("%d samples after a prefill-less booking and an untimed completion, want 2", n)
	}
	if tr.Reordered() {
		t.Fatal("reordered on 2 samples")
	}
	// A re-added owner starts its order afresh (the partition's share is kept).
	tr.RemoveOwner(o)
	tr.AddOwner(o)
	add("j", 7000, 10)
	done("j", 7100)
	if _, n := tr.ReorderShare(); n != 2 {
		t.Fatalf("re-added owner's first completion was a sample (%d)", n)
	}
}

// TestReorderShareForgets: after the window the share follows the engine's current discipline.
func TestReorderShareForgets(t *testing.T) {
	var e reorderEstimator
	for range 1000 {
		e.observe(true)
	}
	for range 3 * reorderWindow {
		e.observe(false)
	}
	if want := math.Pow(1-1.0/reorderWindow, 3*reorderWindow); math.Abs(e.share-want) > 1e-9 || e.share >= ReorderedShare {
		t.Fatalf("share %v after 3 windows of arrival order, want %v", e.share, want)
	}
}
