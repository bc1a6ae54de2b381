package load

import (
	"fmt"
	"math"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// book adds a booking of tokens uncached tokens on o under a fresh id.
func (h *heatFixture) book(o kvwire.Owner, tokens uint64) {
	h.n++
	if err := h.tr.Add(Booking{ID: fmt.Sprint(h.n), Owner: o, PrefillTokens: tokens}); err != nil {
		h.t.Fatal(err)
	}
}

type heatFixture struct {
	t  *testing.T
	tr *Tracker
	n  int
}

var heatA, heatB, heatC = kvwire.Owner{Worker: 1}, kvwire.Owner{Worker: 2}, kvwire.Owner{Worker: 3}

func newHeatFixture(t *testing.T, window float64) *heatFixture {
	h := &heatFixture{t: t, tr: newTestTracker(t, heatA, heatB, heatC)}
	h.tr.SetHeatWindow(window)
	return h
}

// ratio is owner i's heat over owner j's (ordinals).
func (h *heatFixture) ratio(i, j int) float64 {
	return h.tr.InsertionHeatAt(i) / h.tr.InsertionHeatAt(j)
}

// The clock is the tracker's insertion volume: an owner's heat decays by exp(−v/W) over the v
// tokens booked anywhere since, however they are split and wherever they go.
func TestInsertionHeatDecaysOnTheInsertionClock(t *testing.T) {
	h := newHeatFixture(t, 1000)
	h.book(heatA, 1000)
	h.book(heatB, 1000)
	if got, want := h.ratio(0, 1), math.Exp(-1); math.Abs(got-want) > 1e-12 {
		t.Fatalf("A/B after one window = %v, want e^-1 = %v", got, want)
	}
	// 2,000 more tokens on C in four bookings: A and B decay alike, by e^-2 against C's newest.
	for range 4 {
		h.book(heatC, 500)
	}
	if got, want := h.ratio(0, 1), math.Exp(-1); math.Abs(got-want) > 1e-12 {
		t.Fatalf("A/B changed while only C took work: %v, want %v", got, want)
	}
	// C's heat: 500·(e^-1.5 + e^-1 + e^-0.5 + 1) against B's 1000·e^-2.
	wantBC := 1000 * math.Exp(-2) / (500 * (math.Exp(-1.5) + math.Exp(-1) + math.Exp(-0.5) + 1))
	if got := h.ratio(1, 2); math.Abs(got-wantBC) > 1e-12 {
		t.Fatalf("B/C = %v, want %v", got, wantBC)
	}
	if l := h.tr.LoadAt(0); l.InsertionHeat != h.tr.InsertionHeatAt(0) {
		t.Fatalf("LoadAt heat %v, InsertionHeatAt %v", l.InsertionHeat, h.tr.InsertionHeatAt(0))
	}
}

// Bookings without uncached tokens store nothing and move no clock; completions and frees
// change no heat.
func TestInsertionHeatOnlyCountsUncachedTokens(t *testing.T) {
	h := newHeatFixture(t, 1000)
	h.book(heatA, 400)
	h.book(heatB, 400)
	before := h.ratio(0, 1)
	h.book(heatC, 0)
	if err := h.tr.PrefillComplete("1"); err != nil {
		t.Fatal(err)
	}
	if err := h.tr.Free("2"); err != nil {
		t.Fatal(err)
	}
	if got := h.ratio(0, 1); got != before {
		t.Fatalf("A/B moved from %v to %v without an insertion", before, got)
	}
	if h.tr.InsertionHeatAt(2) != 0 {
		t.Fatalf("C heat %v after a fully cached booking", h.tr.InsertionHeatAt(2))
	}
}

// Past heatRescaleAt windows every heat is rescaled: ratios are kept and nothing overflows.
func TestInsertionHeatRescales(t *testing.T) {
	h := newHeatFixture(t, 10)
	h.book(heatA, 10) // A at E = 1
	h.book(heatB, 10) // B at E = 2
	for range heatRescaleAt + 100 {
		h.book(heatC, 10) // a window each: E passes the bound once
	}
	if h.tr.heatE > heatRescaleAt {
		t.Fatalf("E = %v, not rescaled", h.tr.heatE)
	}
	for i := range 3 {
		if v := h.tr.InsertionHeatAt(i); math.IsInf(v, 0) || math.IsNaN(v) {
			t.Fatalf("heat %d = %v", i, v)
		}
	}
	if got, want := h.ratio(0, 1), math.Exp(-1); math.Abs(got-want) > 1e-9*want {
		t.Fatalf("A/B after rescaling = %v, want %v", got, want)
	}
	if h.tr.InsertionHeatAt(1) >= h.tr.InsertionHeatAt(2) {
		t.Fatalf("B (%v) not colder than C (%v) after 600 windows of C", h.tr.InsertionHeatAt(1), h.tr.InsertionHeatAt(2))
	}
}

// A booking of more windows than the bound rescales first: earlier heats decay to 0, nothing
// overflows.
func TestInsertionHeatHugeBooking(t *testing.T) {
	h := newHeatFixture(t, 1)
	h.book(heatA, 10)
	h.book(heatB, 1<<62)
	if a, b := h.tr.InsertionHeatAt(0), h.tr.InsertionHeatAt(1); a != 0 || !(b > 0) || math.IsInf(b, 0) {
		t.Fatalf("heats after a booking of 2^62 windows: A %v, B %v", a, b)
	}
	h.book(heatA, 1)
	if a, b := h.tr.InsertionHeatAt(0), h.tr.InsertionHeatAt(1); math.IsInf(a, 0) || math.IsNaN(a) || !(b > a) {
		t.Fatalf("heats after one more token: A %v, B %v", a, b)
	}
}

// Without a window (the partition's capacity unknown) nothing is tracked and every heat reads 0;
// a window set later starts from the heats kept.
func TestInsertionHeatOff(t *testing.T) {
	h := newHeatFixture(t, 0)
	h.book(heatA, 1000)
	for i := range 3 {
		if h.tr.InsertionHeatAt(i) != 0 || h.tr.LoadAt(i).InsertionHeat != 0 {
			t.Fatalf("heat %d = %v with tracking off", i, h.tr.InsertionHeatAt(i))
		}
	}
	for _, w := range []float64{-1, math.NaN(), math.Inf(1)} {
		h.tr.SetHeatWindow(w)
		if h.tr.HeatWindow() != 0 {
			t.Fatalf("window %v accepted as %v", w, h.tr.HeatWindow())
		}
	}
	h.tr.SetHeatWindow(1000)
	h.book(heatB, 1000)
	if h.tr.InsertionHeatAt(0) != 0 || !(h.tr.InsertionHeatAt(1) > 0) {
		t.Fatalf("heats %v, %v: the booking made while off counted", h.tr.InsertionHeatAt(0), h.tr.InsertionHeatAt(1))
	}
	// A removed and re-added owner starts cold.
	h.tr.RemoveOwner(heatB)
	h.tr.AddOwner(heatB)
	if h.tr.InsertionHeatAt(1) != 0 {
		t.Fatalf("re-added owner heat %v", h.tr.InsertionHeatAt(1))
	}
}
