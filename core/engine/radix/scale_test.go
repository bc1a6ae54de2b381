//go:build scale

package radix

import "testing"

// TestWorkloadShape guards the benchmark workload itself: it must reach the sizes the targets
// are stated for, with a shared head and thin tails, and agree with the reference on a sample.
func TestWorkloadShape(t *testing.T) {
	w := genWorkload(defaultWL)
	ix := w.build(t)
	st := ix.Stats()
	if st.Entries < 1_000_000 || st.Owners != 512 {
		t.Fatalf("workload too small: %+v", st)
	}
	var m Match
	heads, tails := 0, 0
	for _, q := range w.queries[:500] {
		ix.Match(q, &m)
		if len(m.Owners) >= 64 {
			heads++
		}
		deep := 0
		for _, x := range m.Owners {
			if x.Device+x.HostExt > 30 {
				deep++
			}
		}
		if deep >= 1 && deep <= 2 {
			tails++
		}
	}
	if heads < 250 || tails < 400 {
		t.Fatalf("workload not head-heavy/tail-thin: %d/500 queries meet ≥64 owners, %d have 1–2 deep owners", heads, tails)
	}
	t.Logf("stats %+v, %.1f B/entry (arena estimate)", st, float64(st.Bytes)/float64(st.Entries))
}
