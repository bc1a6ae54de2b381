package load

import (
	"slices"
	"testing"
)

// liveNodes counts the trie nodes in use.
func (t *Tracker) liveNodes() int { return len(t.nodes) - 1 - len(t.freeNodes) }

// TestMultiTurnStaysCompressed: a conversation whose every turn extends the
// previous prompt, with turns overlapping by one booking, must not leave a
// split behind per turn: when the previous turn is freed its node merges
// back, so the live path stays one edge long and walks stay cheap.
func TestMultiTurnStaysCompressed(t *testing.T) {
	tr := newTestTracker(t, w1r0)
	var blocks []uint64
	for turn := range 200 {
		blocks = append(blocks, uint64(turn), uint64(turn)+1000)
		id := string(rune('A' + turn))
		if err := tr.Add(Booking{ID: id, Owner: w1r0, Hashes: chain(blocks)}); err != nil {
			t.Fatal(err)
		}
		if turn > 0 {
			if err := tr.Free(string(rune('A' + turn - 1))); err != nil {
				t.Fatal(err)
			}
		}
		mustCheck(t, tr)
		if n := tr.liveNodes(); n != 1 {
			t.Fatalf("turn %d: %d live nodes, want 1", turn, n)
		}
	}
	wantLoad(t, tr, w1r0, 0, 400, 1)
	var m PrefixMatch
	tr.ActivePrefix(chain(append(slices.Clone(blocks), 7)), &m)
	if want := []PrefixEntry{{w1r0, 400}}; !slices.Equal(m.Entries(), want) {
		t.Fatalf("ActivePrefix = %+v", m.Entries())
	}
}

// TestNoMergeAcrossOwnersOrWeights: a node and its only child stay apart
// while they differ in owners, counts or weights.
func TestNoMergeAcrossOwnersOrWeights(t *testing.T) {
	tests := []struct {
		name  string
		setup func(tr *Tracker) error
		nodes int
	}{
		{"other owner holds the prefix only", func(tr *Tracker) error {
			if err := tr.Add(Booking{ID: "a", Owner: w1r0, Hashes: chain([]uint64{1, 2, 3})}); err != nil {
				return err
			}
			if err := tr.Add(Booking{ID: "x", Owner: w1r1, Hashes: chain([]uint64{1})}); err != nil {
				return err
			}
			if err := tr.Add(Booking{ID: "b", Owner: w1r0, Hashes: chain([]uint64{1})}); err != nil {
				return err
			}
			return tr.Free("b") // w1r1 still ends at [1]
		}, 2},
		{"weights differ", func(tr *Tracker) error {
			if err := tr.Add(Booking{ID: "a", Owner: w1r0, Hashes: chain([]uint64{1, 2})}); err != nil {
				return err
			}
			if err := tr.OutputBlock("a", 1, 0.5, true); err != nil {
				return err
			}
			if err := tr.Add(Booking{ID: "b", Owner: w1r0, Hashes: chain([]uint64{1, 2, 3})}); err != nil {
				return err
			}
			return tr.Free("a")
		}, 2},
		{"same owners, counts and weights merge", func(tr *Tracker) error {
			if err := tr.Add(Booking{ID: "a", Owner: w1r0, Hashes: chain([]uint64{1, 2})}); err != nil {
				return err
			}
			if err := tr.Add(Booking{ID: "b", Owner: w1r0, Hashes: chain([]uint64{1, 2, 3})}); err != nil {
				return err
			}
			return tr.Free("a")
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestTracker(t, w1r0, w1r1)
			if err := tc.setup(tr); err != nil {
				t.Fatal(err)
			}
			mustCheck(t, tr)
			if n := tr.liveNodes(); n != tc.nodes {
				t.Fatalf("%d live nodes, want %d", n, tc.nodes)
			}
		})
	}
}
