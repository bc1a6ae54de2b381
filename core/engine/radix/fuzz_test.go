package radix

import (
	"errors"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// opReader decodes fuzz bytes into operations; reads past the end yield zeros, so every byte
// string is a valid program.
type opReader struct {
	b []byte
	i int
}

func (r *opReader) next() byte {
	if r.i >= len(r.b) {
		r.i++
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *opReader) more() bool { return r.i < len(r.b) }

// FuzzIndexOps interprets the input as a sequence of Store/Remove/ClearOwner/RemoveWorker
// operations over a small universe (4 workers × 2 ranks, 4 local labels, 32 external hashes,
// tiers including invalid ones) and checks every result and observable against the naive
// reference.
func FuzzIndexOps(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 1, 2, 3, 4, 5, 6})
	f.Add([]byte{0, 1, 0, 4, 1, 1, 2, 2, 3, 3, 4, 4, 1, 1, 5, 1, 3, 2, 2})
	f.Add([]byte{0, 2, 0, 2, 9, 1, 8, 2, 0, 2, 1, 9, 2, 10, 3, 2, 2, 0, 1, 9, 3, 2, 4})
	f.Add([]byte{0, 3, 0, 3, 1, 1, 2, 2, 3, 3, 0, 3, 2, 2, 4, 1, 5, 2, 1, 3, 1, 2})
	probes := [][]uint64{{0}, {0, 0}, {1, 0, 2}, {1}, {1, 1}, {1, 2}, {2, 1}, {1, 2, 3}, {1, 1, 1, 1}, {1, 2, 3, 4, 1}, {3, 3, 3}}
	var owners []kvwire.Owner
	for w := range uint64(4) {
		for k := range uint32(2) {
			owners = append(owners, kvwire.Owner{Worker: w, Rank: k})
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		ix, ref := New(), newRef()
		r := &opReader{b: data}
		for r.more() {
			op := r.next() % 4
			o := owners[r.next()%8]
			tier := kvwire.Tier(r.next() % 5) // 4 is invalid
			switch op {
			case 0, 1: // store; op 1 uses a parent
				n := int(r.next() % 6)
				var parent uint64
				if op == 1 {
					parent = uint64(r.next() % 32)
				}
				blocks := make([]StoredBlock, n)
				for i := range blocks {
					blocks[i] = StoredBlock{External: uint64(r.next() % 32), Local: uint64(r.next() % 4)}
				}
				e1 := ix.Store(o, tier, parent, op == 1, blocks)
				e2 := ref.Store(o, tier, parent, op == 1, blocks)
				if (e1 == nil) != (e2 == nil) || (e2 != nil && !errors.Is(e1, e2)) {
					t.Fatalf("Store: got %v want %v", e1, e2)
				}
			case 2:
				ext := make([]uint64, r.next()%4)
				for i := range ext {
					ext[i] = uint64(r.next() % 32)
				}
				r1, u1 := ix.Remove(o, tier, ext)
				r2, u2 := ref.Remove(o, tier, ext)
				if r1 != r2 || u1 != u2 {
					t.Fatalf("Remove=(%d,%d) want (%d,%d)", r1, u1, r2, u2)
				}
			case 3:
				if tier%2 == 0 {
					if a, b := ix.ClearOwner(o), ref.ClearOwner(o); a != b {
						t.Fatalf("ClearOwner=%d want %d", a, b)
					}
				} else if a, b := ix.RemoveWorker(o.Worker), ref.RemoveWorker(o.Worker); a != b {
					t.Fatalf("RemoveWorker=%d want %d", a, b)
				}
			}
		}
		compareWithRef(t, ix, ref, probes, owners)
	})
}
