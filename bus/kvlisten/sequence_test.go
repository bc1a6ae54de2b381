package kvlisten

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestClassifyTable pins each sequence and restart rule, including the uint64 limits.
func TestClassifyTable(t *testing.T) {
	unset := watermark{}
	at := func(w uint64) watermark { return watermark{set: true, w: w} }
	cases := []struct {
		name  string
		wm    watermark
		s     uint64
		fresh bool
		want  decision
	}{
		{"first_zero", unset, 0, false, decision{vApply, 0}},
		{"first_late_joiner", unset, 7, false, decision{vGap, 0}},
		{"first_fresh_ignored", unset, 7, true, decision{vGap, 0}},
		{"next", at(4), 5, false, decision{vApply, 0}},
		{"next_after_reconnect", at(4), 5, true, decision{vApply, 0}},
		{"gap", at(4), 9, false, decision{vGap, 5}},
		{"gap_after_reconnect", at(4), 9, true, decision{vGap, 5}},
		{"duplicate_of_w", at(9), 9, false, decision{vStale, 0}},
		{"near_w_stale", at(9), 8, false, decision{vStale, 0}},
		{"midpoint_stale", at(10), 5, false, decision{vStale, 0}},
		{"near_zero_restart", at(10), 4, false, decision{vRestart, 0}},
		{"zero_restart", at(1), 0, false, decision{vRestart, 0}},
		{"w_zero_dup_stale", at(0), 0, false, decision{vStale, 0}},
		{"w_zero_dup_after_reconnect", at(0), 0, true, decision{vRestart, 0}},
		{"far_from_zero_stale", at(1_000_000), 5000, false, decision{vStale, 0}},
		{"far_from_zero_after_reconnect", at(1_000_000), 5000, true, decision{vRestart, 0}},
		{"window_edge_in", at(1_000_000), 1023, false, decision{vRestart, 0}},
		{"window_edge_out", at(1_000_000), 1024, false, decision{vStale, 0}},
		{"max_w_next_impossible", at(math.MaxUint64), math.MaxUint64, false, decision{vStale, 0}},
		{"max_seq_gap", at(0), math.MaxUint64, false, decision{vGap, 1}},
		{"max_w_zero_seq", at(math.MaxUint64), 0, false, decision{vRestart, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.wm, tc.s, tc.fresh, DefaultRestartWindow); got != tc.want {
				t.Fatalf("classify(%+v, %d, fresh=%v) = %v/%d, want %v/%d", tc.wm, tc.s, tc.fresh,
					got.verdict, got.from, tc.want.verdict, tc.want.from)
			}
		})
	}
}

// naiveClassify restates the rules with big-enough arithmetic and no
// shortcuts, as the reference for the property test.
func naiveClassify(wm watermark, s uint64, fresh bool, window uint64) decision {
	if !wm.set {
		if s == 0 {
			return decision{verdict: vApply}
		}
		return decision{verdict: vGap}
	}
	S, W := float64(s), float64(wm.w) // exact below 2^53, used only there
	switch {
	case S == W+1:
		return decision{verdict: vApply}
	case S > W+1:
		return decision{verdict: vGap, from: wm.w + 1}
	case fresh:
		return decision{verdict: vRestart}
	case S < float64(window) && S-0 < W-S:
		return decision{verdict: vRestart}
	default:
		return decision{verdict: vStale}
	}
}

// TestClassifyMatchesNaive compares classify with an independent restatement of the
// rules on random inputs.
func TestClassifyMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200_000; i++ {
		var wm watermark
		if r.IntN(8) != 0 {
			wm = watermark{set: true, w: r.Uint64N(1 << 20)}
		}
		s := r.Uint64N(1 << 20)
		if r.IntN(4) == 0 && wm.set { // bias towards the interesting region
			s = wm.w + 1 - min(wm.w+1, r.Uint64N(16))
		}
		fresh := r.IntN(2) == 0
		window := 1 + r.Uint64N(4096)
		if got, want := classify(wm, s, fresh, window), naiveClassify(wm, s, fresh, window); got != want {
			t.Fatalf("classify(%+v, %d, %v, %d) = %+v, naive %+v", wm, s, fresh, window, got, want)
		}
	}
}

// FuzzClassify checks properties that must hold for any input:
// a forward seq is never stale or a restart, a backward seq is never applied,
// and a restart after a reconnect is decided for every backward seq.
func FuzzClassify(f *testing.F) {
	f.Add(uint64(5), true, uint64(3), false, uint64(1024))
	f.Add(uint64(math.MaxUint64), true, uint64(0), true, uint64(0))
	f.Fuzz(func(t *testing.T, w uint64, set bool, s uint64, fresh bool, window uint64) {
		wm := watermark{set: set, w: w}
		d := classify(wm, s, fresh, window)
		switch {
		case !set:
			if (s == 0) != (d.verdict == vApply) || (s > 0 && (d.verdict != vGap || d.from != 0)) {
				t.Fatalf("unset: %+v for %d", d, s)
			}
		case s > w:
			if d.verdict != vApply && d.verdict != vGap {
				t.Fatalf("forward seq %d over %d got %v", s, w, d.verdict)
			}
			if d.verdict == vGap && (d.from != w+1 || d.from >= s) {
				t.Fatalf("bad gap start %d for %d over %d", d.from, s, w)
			}
		default:
			if d.verdict != vStale && d.verdict != vRestart {
				t.Fatalf("backward seq %d under %d got %v", s, w, d.verdict)
			}
			if fresh && d.verdict != vRestart {
				t.Fatalf("backward seq after reconnect not a restart")
			}
		}
	})
}

// TestBackoff pins the exponential schedule and its cap, including overflow.
func TestBackoff(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		attempt int
		want    time.Duration
	}{{0, 100 * ms}, {1, 200 * ms}, {2, 400 * ms}, {5, 3200 * ms}, {6, 5000 * ms}, {1000, 5000 * ms}}
	for _, tc := range cases {
		if got := backoff(100*ms, 5*time.Second, tc.attempt); got != tc.want {
			t.Errorf("backoff(attempt %d) = %v, want %v", tc.attempt, got, tc.want)
		}
	}
	if got := backoff(time.Duration(math.MaxInt64/2+1), time.Duration(math.MaxInt64), 3); got <= 0 {
		t.Errorf("overflowing backoff = %v", got)
	}
}
