package load

import (
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestDecayWeights covers OutputBlock with a decay fraction: which blocks
// take the fraction, and how the sum rounds.
func TestDecayWeights(t *testing.T) {
	type op struct {
		add      *Booking
		free     string
		out      string
		fraction float64
		has      bool
	}
	add := func(id string, o kvwire.Owner, blocks ...uint64) op {
		return op{add: &Booking{ID: id, Owner: o, Hashes: chain(blocks)}}
	}
	out := func(id string, f float64) op { return op{out: id, fraction: f, has: true} }
	out1 := func(id string) op { return op{out: id} }
	free := func(id string) op { return op{free: id} }

	tests := []struct {
		name string
		ops  []op
		want map[kvwire.Owner]uint64
	}{
		{"whole booking exclusive", []op{add("a", w1r0, 1, 2, 3), out("a", 0.5)},
			map[kvwire.Owner]uint64{w1r0: 2}}, // 3×0.5 + 0.5 = 2
		{"half rounds up", []op{add("a", w1r0, 1, 2), out("a", 0.5)},
			map[kvwire.Owner]uint64{w1r0: 2}}, // 1.5
		{"below half rounds down", []op{add("a", w1r0, 1), out("a", 0.2)},
			map[kvwire.Owner]uint64{w1r0: 0}}, // 0.4
		{"exact decimal half", []op{add("a", w1r0, 1, 2, 3, 4), out("a", 0.1)},
			map[kvwire.Owner]uint64{w1r0: 1}}, // 5×0.1 = 0.5 exactly in fixed point
		{"fraction zero", []op{add("a", w1r0, 1, 2, 3), out("a", 0)},
			map[kvwire.Owner]uint64{w1r0: 0}},
		{"fraction one", []op{add("a", w1r0, 1, 2, 3), out("a", 1)},
			map[kvwire.Owner]uint64{w1r0: 4}},
		{"shared prefix keeps weight 1", []op{
			add("a", w1r0, 1, 2, 3), add("b", w1r0, 1, 2, 4, 5), out("a", 0.5)},
			map[kvwire.Owner]uint64{w1r0: 5}}, // s1,s2=2 + a3 .5 + out .5 + b4,b5 2
		{"prefix of another booking is shared", []op{
			add("a", w1r0, 1, 2, 3), add("b", w1r0, 1, 2), out("a", 0)},
			map[kvwire.Owner]uint64{w1r0: 2}}, // only block 3 and the output decay
		{"identical prompts: nothing exclusive but the output", []op{
			add("a", w1r0, 1, 2), add("b", w1r0, 1, 2), out("a", 0)},
			map[kvwire.Owner]uint64{w1r0: 2}},
		{"other owner unaffected", []op{
			add("a", w1r0, 1, 2, 3), add("b", w1r1, 1, 2, 3), out("a", 0)},
			map[kvwire.Owner]uint64{w1r0: 0, w1r1: 3}},
		{"undecayed outputs after a decay weigh 1", []op{
			add("a", w1r0, 1, 2), out("a", 0.25), out1("a"), out1("a")},
			map[kvwire.Owner]uint64{w1r0: 3}}, // 2×.25 + .25 + 1 + 1 = 2.75
		{"a later decay re-weights every output", []op{
			add("a", w1r0, 1, 2), out("a", 0.25), out1("a"), out("a", 0.1)},
			map[kvwire.Owner]uint64{w1r0: 1}}, // 2×.1 + 3×.1 = 0.5
		{"fraction stays when the block is shared later", []op{
			add("a", w1r0, 1, 2), out("a", 0.5), add("c", w1r0, 1, 2, 3)},
			map[kvwire.Owner]uint64{w1r0: 3}}, // 2×.5 + .5 + 1 = 2.5
		{"fraction stays after the decaying booking leaves", []op{
			add("a", w1r0, 1, 2), out("a", 0.5), add("c", w1r0, 1, 2, 3), free("a")},
			map[kvwire.Owner]uint64{w1r0: 2}}, // 2×.5 + 1
		{"released decayed suffix takes its weight away", []op{
			add("a", w1r0, 1, 2, 3, 4), add("b", w1r0, 1), out("a", 0.5), free("a")},
			map[kvwire.Owner]uint64{w1r0: 1}},
		{"decay after the sharer left covers the freed prefix", []op{
			add("a", w1r0, 1, 2, 3), add("b", w1r0, 1, 2), free("b"), out("a", 0.25)},
			map[kvwire.Owner]uint64{w1r0: 1}}, // 3×.25 + .25
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTestTracker(t, w1r0, w1r1)
			for i, o := range tc.ops {
				var err error
				switch {
				case o.add != nil:
					err = tr.Add(*o.add)
				case o.free != "":
					err = tr.Free(o.free)
				default:
					err = tr.OutputBlock(o.out, uint64(i), o.fraction, o.has)
				}
				if err != nil {
					t.Fatalf("op %d: %v", i, err)
				}
				mustCheck(t, tr)
			}
			for o, want := range tc.want {
				if got := tr.Load(o).ActiveBlocks; got != want {
					t.Fatalf("%v: ActiveBlocks %d, want %d (weight %d)", o, got, want, tr.owners[tr.slots[o]].weight)
				}
			}
		})
	}
}

// TestDecayExactOverLongRuns: fractions that are not exact binary or
// decimal values (1/3, 0.7) applied over many booking lifetimes leave no
// residue: the weight sum returns to exactly the permanent booking's blocks.
func TestDecayExactOverLongRuns(t *testing.T) {
	tr := newTestTracker(t, w1r0)
	base := chain([]uint64{1, 2, 3})
	if err := tr.Add(Booking{ID: "permanent", Owner: w1r0, Hashes: base}); err != nil {
		t.Fatal(err)
	}
	for i := range 10_000 {
		h := chain([]uint64{1, 2, 3, uint64(i), uint64(i)})
		if err := tr.Add(Booking{ID: "x", Owner: w1r0, Hashes: h}); err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			f := []float64{1.0 / 3, 0.7, 0.123456789}[(i+k)%3]
			if err := tr.OutputBlock("x", uint64(k), f, true); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.Free("x"); err != nil {
			t.Fatal(err)
		}
	}
	if w := tr.owners[tr.slots[w1r0]].weight; w != 3*WeightUnit {
		t.Fatalf("weight after churn %d, want exactly %d", w, 3*WeightUnit)
	}
	mustCheck(t, tr)
}

func TestRoundBlocks(t *testing.T) {
	tests := []struct {
		w    uint64
		want uint64
	}{
		{0, 0},
		{WeightUnit/2 - 1, 0},
		{WeightUnit / 2, 1},
		{WeightUnit, 1},
		{3*WeightUnit + WeightUnit/2, 4},
		{3*WeightUnit + WeightUnit/2 - 1, 3},
		{^uint64(0), ^uint64(0)/WeightUnit + 1}, // no overflow at the top
	}
	for _, tc := range tests {
		if got := roundBlocks(tc.w); got != tc.want {
			t.Errorf("roundBlocks(%d) = %d, want %d", tc.w, got, tc.want)
		}
	}
}
