package load

import (
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestPropertyAgainstReference runs seeded random operation sequences
// (owners coming and going, duplicate and unknown ids, shared and diverging
// prompts, decay with valid and invalid fractions, expiry) against the naive
// per-owner-map reference, comparing Load, Loads, Lookup, Len, ActivePrefix
// and the tracker's internal invariants after every step.
func TestPropertyAgainstReference(t *testing.T) {
	seeds, steps := 100, 400
	if testing.Short() {
		seeds = 40
	}
	runProperty(t, seeds, steps, newHarness)
}

// TestPropertyWide is the same with 48 owners, so that ActivePrefix answers
// often have many entries collected in several runs that must be merged.
func TestPropertyWide(t *testing.T) {
	seeds, steps := 6, 800
	if testing.Short() {
		seeds = 2
	}
	var wide, dense int
	runProperty(t, seeds, steps, func(c chooser) *harness {
		h := newWideHarness(c)
		h.onQuery = func(m *PrefixMatch) {
			if m.Len() >= 8 && len(m.runs) >= 3 && !m.dense {
				wide++
			}
			if m.Len() >= 24 && m.dense {
				dense++
			}
		}
		return h
	})
	if wide == 0 || dense == 0 {
		t.Fatalf("%d queries merged three runs, %d took the dense path: both must be covered", wide, dense)
	}
}

func runProperty(t *testing.T, seeds, steps int, mk func(chooser) *harness) {
	t.Helper()
	for seed := range seeds {
		h := mk(randChooser{rand.New(rand.NewPCG(uint64(seed), 0x10ad))})
		// Start with most owners known so that bookings land.
		for w := 1; w <= h.workers; w++ {
			for r := range 2 {
				o := kvwire.Owner{Worker: uint64(w), Rank: uint32(r)}
				h.t.AddOwner(o)
				h.ref.addOwner(o)
			}
		}
		for i := range steps {
			if err := h.step(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, i, err)
			}
		}
		// Draining everything must return every counter to exactly zero.
		for id := range h.ref.bookings {
			if err := h.t.Free(id); err != nil {
				t.Fatalf("seed %d: drain %q: %v", seed, id, err)
			}
		}
		for _, l := range h.t.Loads(nil) {
			if l.ActiveBlocks != 0 || l.ActivePrefillTokens != 0 || l.ActiveRequests != 0 {
				t.Fatalf("seed %d: after drain %+v", seed, l)
			}
		}
		for _, s := range h.t.order {
			if h.t.owners[s].weight != 0 {
				t.Fatalf("seed %d: owner %v weight %d after drain", seed, h.t.owners[s].id, h.t.owners[s].weight)
			}
		}
		if len(h.t.heads) != 0 {
			t.Fatalf("seed %d: %d trie heads after drain", seed, len(h.t.heads))
		}
	}
}

// FuzzOps drives the same harness from fuzz bytes: no input may panic or
// make the tracker disagree with the reference.
func FuzzOps(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 0, 10, 3, 1, 0, 5, 1, 2, 0, 1, 60, 3, 1, 1, 2, 80, 3})
	f.Add([]byte("some longer seed input that exercises many operations in a row"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{data: data}
		h := newHarness(c)
		h.t.AddOwner(kvwire.Owner{Worker: 1})
		h.ref.addOwner(kvwire.Owner{Worker: 1})
		for i := 0; len(c.data) > 0 && i < 500; i++ {
			if err := h.step(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
	})
}
