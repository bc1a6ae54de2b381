package load

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/kvselect/kvselect/kvwire"
)

// refTracker is the naive reference: per-owner maps from tracking hash to
// (reference count, weight), weights as plain integers in WeightUnit, and a
// linear scan for everything. It shares no code with the Tracker.
type refTracker struct {
	owners   map[kvwire.Owner]*refOwner
	bookings map[string]*refBooking
}

type refOwner struct {
	blocks  map[uint64]*refBlock
	prefill uint64
}

type refBlock struct {
	rc int
	w  uint64
}

type refBooking struct {
	id             string
	owner          kvwire.Owner
	hashes         []uint64
	prefill        uint64
	prefillAtAdmit uint64 // PrefillTokens at admission (prefill drops to 0 at completion)
	ctx            uint64
	outputs        []uint64 // weight of each output block
	admitted       int64
}

func newRef() *refTracker {
	return &refTracker{owners: map[kvwire.Owner]*refOwner{}, bookings: map[string]*refBooking{}}
}

func (r *refTracker) addOwner(o kvwire.Owner) {
	if r.owners[o] == nil {
		r.owners[o] = &refOwner{blocks: map[uint64]*refBlock{}}
	}
}

func (r *refTracker) removeOwner(o kvwire.Owner) []string {
	if r.owners[o] == nil {
		return nil
	}
	var ids []string
	for id, b := range r.bookings {
		if b.owner == o {
			ids = append(ids, id)
			r.free(id)
		}
	}
	delete(r.owners, o)
	slices.Sort(ids)
	return ids
}

func (r *refTracker) add(b Booking) error {
	if r.bookings[b.ID] != nil {
		return ErrDuplicate
	}
	ow := r.owners[b.Owner]
	if ow == nil {
		return ErrUnknownOwner
	}
	if ow.prefill+b.PrefillTokens < ow.prefill {
		return ErrOverflow
	}
	if b.PrefillTokens > 0 {
		var sq, cr uint64
		for _, o := range r.bookings {
			if o.owner == b.Owner && o.prefill > 0 {
				t := min(o.prefill, 1<<31)
				sq, cr = sq+t*t, cr+t*min(o.ctx, 1<<31)
			}
		}
		t := min(b.PrefillTokens, 1<<31)
		if t*t > math.MaxUint64-sq || t*min(b.ContextTokens, 1<<31) > math.MaxUint64-cr {
			return ErrOverflow
		}
	}
	for _, h := range b.Hashes {
		if blk := ow.blocks[h]; blk != nil {
			blk.rc++
		} else {
			ow.blocks[h] = &refBlock{rc: 1, w: WeightUnit}
		}
	}
	ow.prefill += b.PrefillTokens
	r.bookings[b.ID] = &refBooking{id: b.ID, owner: b.Owner, hashes: slices.Clone(b.Hashes),
		prefill: b.PrefillTokens, prefillAtAdmit: b.PrefillTokens, ctx: b.ContextTokens, admitted: b.AdmittedAt}
	return nil
}

func (r *refTracker) prefillComplete(id string) error {
	b := r.bookings[id]
	if b == nil {
		return ErrNotFound
	}
	r.owners[b.owner].prefill -= b.prefill
	b.prefill = 0
	return nil
}

func (r *refTracker) outputBlock(id string, f float64, has bool) error {
	b := r.bookings[id]
	if b == nil {
		return ErrNotFound
	}
	if has && (math.IsNaN(f) || f < 0 || f > 1) {
		return ErrInvalidFraction
	}
	b.outputs = append(b.outputs, WeightUnit)
	if has {
		w := uint64(math.Round(f * 1e9))
		for i := range b.outputs {
			b.outputs[i] = w
		}
		// Every prompt block only this booking holds on its owner.
		ow := r.owners[b.owner]
		for _, h := range b.hashes {
			if blk := ow.blocks[h]; blk.rc == 1 {
				blk.w = w
			}
		}
	}
	return nil
}

func (r *refTracker) free(id string) error {
	b := r.bookings[id]
	if b == nil {
		return ErrNotFound
	}
	ow := r.owners[b.owner]
	ow.prefill -= b.prefill
	for _, h := range b.hashes {
		blk := ow.blocks[h]
		if blk.rc--; blk.rc == 0 {
			delete(ow.blocks, h)
		}
	}
	delete(r.bookings, id)
	return nil
}

func (r *refTracker) expire(cutoff int64) []string {
	var old []*refBooking
	for _, b := range r.bookings {
		if b.admitted < cutoff {
			old = append(old, b)
		}
	}
	slices.SortFunc(old, func(a, b *refBooking) int {
		if a.admitted != b.admitted {
			if a.admitted < b.admitted {
				return -1
			}
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	var ids []string
	for _, b := range old {
		ids = append(ids, b.id)
		r.free(b.id)
	}
	return ids
}

func (r *refTracker) load(o kvwire.Owner) RankLoad {
	ow := r.owners[o]
	if ow == nil {
		return RankLoad{Owner: o}
	}
	var sum uint64
	for _, blk := range ow.blocks {
		sum += blk.w
	}
	n, pending := 0, 0
	var squares, cross, contexts uint64
	for _, b := range r.bookings {
		if b.owner == o {
			n++
			contexts += min(b.prefillAtAdmit, 1<<31) + min(b.ctx, 1<<31)
			if b.prefill > 0 {
				pending++
				t := min(b.prefill, 1<<31)
				squares += t * t
				cross += t * min(b.ctx, 1<<31)
			}
			for _, w := range b.outputs {
				sum += w
			}
		}
	}
	// Round half up in exact integer arithmetic, independently of
	// roundBlocks: compare twice the remainder with the unit.
	blocks := sum / WeightUnit
	if 2*(sum%WeightUnit) >= WeightUnit {
		blocks++
	}
	return RankLoad{Owner: o, ActivePrefillTokens: ow.prefill, ActiveBlocks: blocks, ActiveRequests: n,
		PendingPrefills: pending, PrefillSquares: squares, PrefillCross: cross, ContextTokens: contexts}
}

func (r *refTracker) loads() []RankLoad {
	var out []RankLoad
	for o := range r.owners {
		out = append(out, r.load(o))
	}
	slices.SortFunc(out, func(a, b RankLoad) int { return a.Owner.Compare(b.Owner) })
	return out
}

func (r *refTracker) activePrefix(q []uint64) []PrefixEntry {
	var out []PrefixEntry
	for o, ow := range r.owners {
		n := 0
		for n < len(q) && ow.blocks[q[n]] != nil {
			n++
		}
		if n > 0 {
			out = append(out, PrefixEntry{Owner: o, Blocks: n})
		}
	}
	slices.SortFunc(out, func(a, b PrefixEntry) int { return a.Owner.Compare(b.Owner) })
	return out
}

// sameErr reports whether the tracker's error wraps the reference's sentinel
// (or both are nil).
func sameErr(got, want error) error {
	if want == nil && got == nil {
		return nil
	}
	if want == nil || got == nil || !errors.Is(got, want) {
		return fmt.Errorf("error %v, reference %v", got, want)
	}
	return nil
}
