package sim

import (
	"math"
	"testing"
)

func TestLLMDScoresHandComputed(t *testing.T) {
	cases := []struct {
		name    string
		matched []int
		waiting []int
		usage   []float64
		want    []float64
	}{
		{
			// prefix: min–max over the matched workers (4..8) → 0, 0, 1, 1 (w0 unmatched = 0);
			// queue: (4 − q)/4 → 0.5, 1, 0, 0.5; kv: 1 − usage.
			// total = 2·prefix + kv + queue.
			name: "mixed", matched: []int{0, 4, 8, 8}, waiting: []int{2, 0, 4, 2},
			usage: []float64{0.5, 0.25, 0, 0.75},
			want:  []float64{0 + 0.5 + 0.5, 0 + 0.75 + 1, 2 + 1 + 0, 2 + 0.25 + 0.5},
		},
		{
			// One matched worker: min = max → 1 for it, 0 for the rest; equal queues → 1 each.
			name: "single-match", matched: []int{0, 3, 0}, waiting: []int{5, 5, 5},
			usage: []float64{0, 0, 0},
			want:  []float64{0 + 1 + 1, 2 + 1 + 1, 0 + 1 + 1},
		},
		{
			// Nothing matched anywhere: the prefix scorer gives 0 to every worker.
			name: "no-match", matched: []int{0, 0}, waiting: []int{0, 3},
			usage: []float64{0.9, 0.1},
			want:  []float64{0 + 0.1 + 1, 0 + 0.9 + 0},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := llmdScores(tc.matched, tc.waiting, tc.usage, nil)
			for w := range tc.want {
				if math.Abs(got[w]-tc.want[w]) > 1e-12 {
					t.Fatalf("scores %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestLLMDPickerBreaksTiesAtRandom(t *testing.T) {
	p := NewLLMD(3).(*llmd)
	seen := map[int]int{}
	for range 200 {
		seen[p.pickMax([]float64{1, 2, 2, 0.5})]++
	}
	if len(seen) != 2 || seen[1] == 0 || seen[2] == 0 {
		t.Fatalf("picks %v, want only workers 1 and 2, both", seen)
	}
	// Deterministic per seed.
	a, b := NewLLMD(9).(*llmd), NewLLMD(9).(*llmd)
	for range 50 {
		s := []float64{1, 1, 1, 1}
		if a.pickMax(s) != b.pickMax(s) {
			t.Fatal("same seed, different picks")
		}
	}
}

func TestLLMDFollowsKVEventsNotRoutingHistory(t *testing.T) {
	v := testView(2, 100)
	p := NewLLMD(1).(*llmd)
	// No event yet: a prompt routed to some worker is not in the index, so the next turn is
	// scored cache-blind (llm-d's default has no speculative indexing).
	if p.Prefix(0, []uint64{1, 2}) != 0 || p.Prefix(1, []uint64{1, 2}) != 0 {
		t.Fatal("index not empty")
	}
	// Worker 1 reports blocks 1 and 2: with equal metrics the prefix scorer decides.
	p.Stored(1, 0, false, []uint64{1, 2})
	for id := range 10 {
		if w := p.Pick(v, id, blocksReq(1536, 1, 2, 3)); w != 1 {
			t.Fatalf("pick %d went to %d, want 1 (holds the prefix by KV events)", id, w)
		}
	}
	// Evicted: back to a tie.
	p.Removed(1, []uint64{1, 2})
	if p.Prefix(1, []uint64{1, 2}) != 0 {
		t.Fatal("removed event not applied")
	}
}
