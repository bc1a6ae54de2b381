package load

import (
	"fmt"
	"math"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// book adds a booking of tokens uncached tokens on o under a fresh id.
func (h *heatFixture) book(o kvwire.Owner, tokens uint64) { h.bookHit(o, 0, tokens) }

// bookHit adds a booking of cached then uncached tokens on o under a fresh id.
func (h *heatFixture) bookHit(o kvwire.Owner, cached, uncached uint64) {
	h.n++
	if err := h.tr.Add(Booking{ID: fmt.Sprint(h.n), Owner: o, ContextTokens: cached, PrefillTokens: uncached}); err != nil {
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
	return h.tr.CacheHeatAt(i) / h.tr.CacheHeatAt(j)
}

// The clock is the tracker's traffic: an owner's heat decays by exp(−v/W) over the v prompt
// tokens booked anywhere since, however they are split and wherever they go.
func TestCacheHeatDecaysOnTheTrafficClock(t *testing.T) {
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
	if l := h.tr.LoadAt(0); l.CacheHeat != h.tr.CacheHeatAt(0) {
		t.Fatalf("LoadAt heat %v, CacheHeatAt %v", l.CacheHeat, h.tr.CacheHeatAt(0))
	}
}

// A hit uses the cache as much as a miss: cached and uncached prompt tokens both count, a
// booking of neither moves no clock, and completions and frees change no heat.
func TestCacheHeatCountsReadsAndWrites(t *testing.T) {
	h := newHeatFixture(t, 1000)
	h.book(heatA, 400)
	h.bookHit(heatB, 300, 100)
	if got := h.ratio(0, 1); math.Abs(got-math.Exp(-0.4)) > 1e-12 {
		t.Fatalf("A/B = %v: a 300 + 100 token hit is not 400 tokens of use", got)
	}
	before := h.ratio(0, 1)
	h.bookHit(heatC, 0, 0)
	if err := h.tr.PrefillComplete("1"); err != nil {
		t.Fatal(err)
	}
	if err := h.tr.Free("2"); err != nil {
		t.Fatal(err)
	}
	if got := h.ratio(0, 1); got != before {
		t.Fatalf("A/B moved from %v to %v without a booking of tokens", before, got)
	}
	if h.tr.CacheHeatAt(2) != 0 {
		t.Fatalf("C heat %v after an empty booking", h.tr.CacheHeatAt(2))
	}
	h.bookHit(heatC, 800, 0)
	if !(h.tr.CacheHeatAt(2) > h.tr.CacheHeatAt(1)) {
		t.Fatalf("a fully cached 800-token booking left C (%v) colder than B (%v)", h.tr.CacheHeatAt(2), h.tr.CacheHeatAt(1))
	}
}

// Past heatRescaleAt windows every heat is rescaled: ratios are kept and nothing overflows.
func TestCacheHeatRescales(t *testing.T) {
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
		if v := h.tr.CacheHeatAt(i); math.IsInf(v, 0) || math.IsNaN(v) {
			t.Fatalf("heat %d = %v", i, v)
		}
	}
	if got, want := h.ratio(0, 1), math.Exp(-1); math.Abs(got-want) > 1e-9*want {
		t.Fatalf("A/B after rescaling = %v, want %v", got, want)
	}
	if h.tr.CacheHeatAt(1) >= h.tr.CacheHeatAt(2) {
		t.Fatalf("B (%v) not colder than C (%v) after 600 windows of C", h.tr.CacheHeatAt(1), h.tr.CacheHeatAt(2))
	}
}

// A booking of more windows than the bound rescales first: earlier heats decay to 0, nothing
// overflows.
func TestCacheHeatHugeBooking(t *testing.T) {
	h := newHeatFixture(t, 1)
	h.book(heatA, 10)
	h.book(heatB, 1<<62)
	if a, b := h.tr.CacheHeatAt(0), h.tr.CacheHeatAt(1); a != 0 || !(b > 0) || math.IsInf(b, 0) {
		t.Fatalf("heats after a booking of 2^62 windows: A %v, B %v", a, b)
	}
	h.book(heatA, 1)
	if a, b := h.tr.CacheHeatAt(0), h.tr.CacheHeatAt(1); math.IsInf(a, 0) || math.IsNaN(a) || !(b > a) {
		t.Fatalf("heats after one more token: A %v, B %v", a, b)
	}
}

// Without a window (the partition's capacity unknown) nothing is tracked and every heat reads 0;
// a window set later starts from the heats kept.
func TestCacheHeatOff(t *testing.T) {
	h := newHeatFixture(t, 0)
	h.book(heatA, 1000)
	for i := range 3 {
		if h.tr.CacheHeatAt(i) != 0 || h.tr.LoadAt(i).CacheHeat != 0 {
			t.Fatalf("heat %d = %v with tracking off", i, h.tr.CacheHeatAt(i))
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
	if h.tr.CacheHeatAt(0) != 0 || !(h.tr.CacheHeatAt(1) > 0) {
		t.Fatalf("heats %v, %v: the booking made while off counted", h.tr.CacheHeatAt(0), h.tr.CacheHeatAt(1))
	}
	// A removed and re-added owner starts cold.
	h.tr.RemoveOwner(heatB)
	h.tr.AddOwner(heatB)
	if h.tr.CacheHeatAt(1) != 0 {
		t.Fatalf("re-added owner heat %v", h.tr.CacheHeatAt(1))
	}
}
