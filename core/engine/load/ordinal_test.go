package load

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// TestOrdinalsAgainstReference drives the random operation harness (narrow and wide fleets) and,
// after every step, checks the ordinal API against the naive reference: OwnerAt and LoadAt
// equal the reference's sorted loads position by position, out-of-range ordinals answer zero,
// Version moves exactly when the owner set changes, and ActivePrefixOrdinals equals the
// reference's ActivePrefix scattered by ordinal (with a dirty, too short and too long dst).
func TestOrdinalsAgainstReference(t *testing.T) {
	for _, tc := range []struct {
		name         string
		mk           func(chooser) *harness
		seeds, steps int
	}{
		{"narrow", newHarness, 30, 300},
		{"wide", newWideHarness, 4, 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			versionMoves, nonEmpty := 0, 0
			for seed := range tc.seeds {
				h := tc.mk(randChooser{rand.New(rand.NewPCG(uint64(seed), 0x0d1a))})
				for w := 1; w <= h.workers; w++ {
					for r := range 2 {
						o := kvwire.Owner{Worker: uint64(w), Rank: uint32(r)}
						h.t.AddOwner(o)
						h.ref.addOwner(o)
					}
				}
				dst := make([]uint32, 3)
				for i := range tc.steps {
					before, ownersBefore := h.t.Version(), h.ref.loads()
					if err := h.step(); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, i, err)
					}
					want := h.ref.loads()
					changed := !slices.EqualFunc(ownersBefore, want, func(a, b RankLoad) bool { return a.Owner == b.Owner })
					if moved := h.t.Version() != before; moved != changed {
						t.Fatalf("seed %d step %d: Version moved=%v, owner set changed=%v", seed, i, moved, changed)
					} else if moved {
						versionMoves++
					}
					var err error
					dst, err = checkOrdinals(h, want, dst, &nonEmpty)
					if err != nil {
						t.Fatalf("seed %d step %d: %v", seed, i, err)
					}
					// Dirty the buffer so a missing clear shows up in the next step.
					for j := range dst {
						dst[j] = 0xdead
					}
					if i%7 == 0 {
						dst = dst[:0:0] // and sometimes force a fresh allocation
					}
				}
			}
			if versionMoves == 0 || nonEmpty == 0 {
				t.Fatalf("weak workload: %d version moves, %d non-empty prefix answers", versionMoves, nonEmpty)
			}
		})
	}
}

// checkOrdinals compares the ordinal reads with the reference loads want.
func checkOrdinals(h *harness, want []RankLoad, dst []uint32, nonEmpty *int) ([]uint32, error) {
	tr := h.t
	if tr.Owners() != len(want) {
		return dst, fmt.Errorf("Owners = %d, reference %d", tr.Owners(), len(want))
	}
	for i, w := range want {
		if o, ok := tr.OwnerAt(i); !ok || o != w.Owner {
			return dst, fmt.Errorf("OwnerAt(%d) = %v %v, reference %v", i, o, ok, w.Owner)
		}
		if got := tr.LoadAt(i); got != w {
			return dst, fmt.Errorf("LoadAt(%d) = %+v, reference %+v", i, got, w)
		}
		prefill, blocks, requests, pending, squares := tr.CountersAt(i)
		if got := (RankLoad{w.Owner, prefill, blocks, requests, pending, squares, tr.CrossAt(i), tr.SpeedAt(i), tr.CacheHeatAt(i), tr.ContextTokensAt(i)}); got != w {
			return dst, fmt.Errorf("CountersAt(%d) = %+v, reference %+v", i, got, w)
		}
	}
	for _, i := range []int{-1, len(want), len(want) + 5} {
		if o, ok := tr.OwnerAt(i); ok || o != (kvwire.Owner{}) {
			return dst, fmt.Errorf("OwnerAt(%d) out of range = %v %v", i, o, ok)
		}
		if got := tr.LoadAt(i); got != (RankLoad{}) {
			return dst, fmt.Errorf("LoadAt(%d) out of range = %+v", i, got)
		}
		if p, b, r, n, q := tr.CountersAt(i); p|b|q != 0 || r|n != 0 {
			return dst, fmt.Errorf("CountersAt(%d) out of range = %d %d %d %d %d", i, p, b, r, n, q)
		}
	}
	queries := [][]uint64{h.prompt(), nil}
	for _, b := range h.ref.bookings {
		queries = append(queries, b.hashes)
		if len(queries) > 14 {
			break
		}
	}
	for _, q := range queries {
		dst = tr.ActivePrefixOrdinals(q, dst)
		ref := make([]uint32, len(want))
		for _, e := range h.ref.activePrefix(q) {
			i := slices.IndexFunc(want, func(l RankLoad) bool { return l.Owner == e.Owner })
			if i < 0 {
				return dst, fmt.Errorf("reference prefix names unknown owner %v", e.Owner)
			}
			ref[i] = uint32(e.Blocks)
			*nonEmpty++
		}
		if !slices.Equal(dst, ref) {
			return dst, fmt.Errorf("ActivePrefixOrdinals(%x) = %v, reference %v", q, dst, ref)
		}
	}
	return dst, nil
}

// FuzzActivePrefixOrdinals: arbitrary operation sequences (the harness driven by fuzz bytes)
// never make the ordinal reads panic or disagree with the reference.
func FuzzActivePrefixOrdinals(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 40, 41, 42, 43, 44, 90, 91, 5, 7, 200, 13})
	f.Add([]byte("ordinals: owners come and go while bookings share prompts"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newWideHarness(&byteChooser{data: data})
		for w := 1; w <= 3; w++ {
			o := kvwire.Owner{Worker: uint64(w), Rank: 0}
			h.t.AddOwner(o)
			h.ref.addOwner(o)
		}
		var dst []uint32
		nonEmpty := 0
		for i := 0; i < 64 && i < len(data); i++ {
			if err := h.step(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			var err error
			if dst, err = checkOrdinals(h, h.ref.loads(), dst, &nonEmpty); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
	})
}
