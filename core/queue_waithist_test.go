package core

import (
	"testing"
	"time"
)

// The wait histogram puts each wait in the first bucket whose bound it does not exceed (bounds
// inclusive, as Prometheus' le), counts waits beyond the last bound only in the total, and its
// snapshot is cumulative.
func TestWaitHistBuckets(t *testing.T) {
	var h waitHist
	for _, d := range []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 2 * time.Second, 90 * time.Second} {
		h.observe(d)
	}
	s := h.snapshot()
	if s.Count != 5 || s.Sum < 92 || s.Sum > 92.01 {
		t.Fatalf("count %d sum %v", s.Count, s.Sum)
	}
	want := map[float64]uint64{0.001: 2, 0.0025: 2, 0.005: 3, 1: 3, 2.5: 4, 60: 4}
	for i, ub := range QueueWaitBuckets {
		if w, ok := want[ub]; ok && s.Cumulative[i] != w {
			t.Errorf("le=%v: %d, want %d", ub, s.Cumulative[i], w)
		}
		if i > 0 && s.Cumulative[i] < s.Cumulative[i-1] {
			t.Errorf("not cumulative at le=%v", ub)
		}
	}
}
