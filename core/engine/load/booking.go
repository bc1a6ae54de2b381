package load

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/kvselect/kvselect/kvwire"
)

// Booking is one request admitted on an owner.
type Booking struct {
	// ID is the request's selection id, unique among the tracker's live
	// bookings.
	ID    string
	Owner kvwire.Owner
	// Hashes are the tracking hashes (chained sequence hashes) of the
	// prompt's complete blocks. The tracker keeps the slice: the caller must
	// not modify it after a successful Add.
	Hashes []uint64
	// PrefillTokens counts toward the owner's active prefill tokens until
	// PrefillComplete or Free (0 = no prefill tracking).
	PrefillTokens uint64
	// ContextTokens is the prompt tokens before the uncached ones (cached when it was booked):
	// the context every uncached token attends to. While the prefill is outstanding,
	// PrefillTokens × ContextTokens counts toward the owner's PrefillCross, and the completion
	// teaches the speed estimator the context's cost (SpeedModel.K).
	ContextTokens uint64
	// ExpectedOutputTokens is carried for the caller (see Get); it does not
	// change the load (Dynamo does not use it either).
	ExpectedOutputTokens uint32
	// AdmittedAt is the admission time in unix nanoseconds from the caller's
	// clock; Expire compares it to its cutoff.
	AdmittedAt int64
}

// bookingRec is a live booking in the slab. A recycled record keeps nothing
// but its zero value.
type bookingRec struct {
	id       string
	hashes   []uint64
	admitted int64
	prefill  uint64 // outstanding prefill tokens (0 once complete)
	ctx      uint64 // context tokens before them (Booking.ContextTokens)
	prompt   uint64 // prompt tokens at admission, capped: its share of ownerState.contexts
	// Output blocks: outOne blocks of weight 1 appended since the last decay
	// call, and outDecayed blocks of weight outW each.
	outOne     uint64
	outDecayed uint64
	outW       uint32
	expected   uint32
	slot       uint32 // owner slot
	ownerPos   uint32 // index in owners[slot].bookings
	tail       uint32 // last trie node of the prompt path, or nilNode
	live       bool
}

// Add books b on its owner. It fails, changing nothing, with ErrDuplicate
// when b.ID is live in this tracker, ErrUnknownOwner when b.Owner is not
// known, and ErrOverflow when the owner's prefill counter, or its sum of squares or of cross
// products (each booking's up to 2^62: four bookings of 2^31 tokens), would overflow.
func (t *Tracker) Add(b Booking) error {
	if _, ok := t.byID[b.ID]; ok {
		return fmt.Errorf("booking %q: %w", b.ID, ErrDuplicate)
	}
	slot, ok := t.slots[b.Owner]
	if !ok {
		return fmt.Errorf("booking %q on worker %d rank %d: %w", b.ID, b.Owner.Worker, b.Owner.Rank, ErrUnknownOwner)
	}
	st := &t.owners[slot]
	if b.PrefillTokens > math.MaxUint64-st.prefill {
		return fmt.Errorf("booking %q: %d prefill tokens: %w", b.ID, b.PrefillTokens, ErrOverflow)
	}
	if b.PrefillTokens > 0 && (square(b.PrefillTokens) > math.MaxUint64-st.squares || cross(b.PrefillTokens, b.ContextTokens) > math.MaxUint64-st.cross) {
		return fmt.Errorf("booking %q: %d prefill tokens after %d: %w", b.ID, b.PrefillTokens, b.ContextTokens, ErrOverflow)
	}

	tail := t.acquire(slot, b.Hashes)
	var bi uint32
	if k := len(t.freeBooks); k > 0 {
		bi = t.freeBooks[k-1]
		t.freeBooks = t.freeBooks[:k-1]
	} else {
		bi = uint32(len(t.books))
		t.books = append(t.books, bookingRec{})
	}
	st = &t.owners[slot]
	prompt := promptTokens(b.PrefillTokens, b.ContextTokens)
	t.books[bi] = bookingRec{
		id:       b.ID,
		hashes:   b.Hashes,
		admitted: b.AdmittedAt,
		prefill:  b.PrefillTokens,
		ctx:      b.ContextTokens,
		prompt:   prompt,
		expected: b.ExpectedOutputTokens,
		slot:     slot,
		ownerPos: uint32(len(st.bookings)),
		tail:     tail,
		live:     true,
	}
	st.bookings = append(st.bookings, bi)
	st.startStretch(b.PrefillTokens, b.AdmittedAt)
	t.heatBook(st, b.ContextTokens, b.PrefillTokens)
	st.prefill += b.PrefillTokens
	st.contexts += prompt
	if b.PrefillTokens > 0 {
		if st.pending == 0 {
			t.busy++
		}
		t.pending++
		st.pending++
		st.order.admitted(b.AdmittedAt)
		st.squares += square(b.PrefillTokens)
		st.cross += cross(b.PrefillTokens, b.ContextTokens)
	}
	t.byID[b.ID] = bi
	return nil
}

// lookup returns the slab index of live booking id.
func (t *Tracker) lookup(id string) (uint32, error) {
	bi, ok := t.byID[id]
	if !ok {
		return 0, fmt.Errorf("booking %q: %w", id, ErrNotFound)
	}
	return bi, nil
}

// PrefillComplete removes the booking's prefill contribution; its blocks
// stay. Calling it again is harmless. ErrNotFound when id is not live.
func (t *Tracker) PrefillComplete(id string) error {
	bi, err := t.lookup(id)
	if err != nil {
		return err
	}
	r := &t.books[bi]
	st := &t.owners[r.slot]
	if r.prefill > 0 {
		st.speed.marked = false // untimed: the stretch's accounting is lost (speedtrack.go)
	}
	t.dropPrefill(st, r.prefill, r.ctx)
	r.prefill = 0
	return nil
}

// sqCap bounds the tokens of one booking that enter PrefillSquares and PrefillCross (each
// booking adds at most 2^62); Add refuses a booking whose sum would overflow (ErrOverflow).
const sqCap = 1 << 31

func square(tokens uint64) uint64 {
	t := min(tokens, sqCap)
	return t * t
}

// promptTokens is a booking's share of its owner's contexts: its prefill and cached context
// tokens, each capped at sqCap, so that no sum of fewer than 2^32 bookings overflows.
func promptTokens(prefill, ctx uint64) uint64 { return min(prefill, sqCap) + min(ctx, sqCap) }

// cross is a prefill's tokens × its cached context, each capped at sqCap.
func cross(tokens, ctx uint64) uint64 { return min(tokens, sqCap) * min(ctx, sqCap) }

// dropPrefill removes one booking's outstanding prefill from the owner's aggregates.
func (t *Tracker) dropPrefill(st *ownerState, tokens, ctx uint64) {
	if tokens == 0 {
		return
	}
	st.prefill -= tokens
	st.pending--
	st.squares -= square(tokens)
	st.cross -= cross(tokens, ctx)
	t.pending--
	if st.pending == 0 {
		t.busy--
	}
}

// OutputBlock appends one output block of weight 1 to the booking. With
// hasFraction, every block the booking exclusively owns on its owner (its
// unshared prompt suffix and all its output blocks, the new one included)
// then weighs fraction, which must lie in [0, 1].
//
// randomHash is the block's hash from the caller's random source. Output
// blocks are private to their booking and never match a prompt, so the
// tracker counts them without keeping the hash; the parameter keeps the
// shape of the lifecycle call.
//
// Errors (nothing changed): ErrNotFound, ErrInvalidFraction.
func (t *Tracker) OutputBlock(id string, randomHash uint64, fraction float64, hasFraction bool) error {
	_ = randomHash
	bi, err := t.lookup(id)
	if err != nil {
		return err
	}
	var w uint32
	if hasFraction {
		var ok bool
		if w, ok = fractionWeight(fraction); !ok {
			return fmt.Errorf("booking %q: fraction %v: %w", id, fraction, ErrInvalidFraction)
		}
	}
	r := &t.books[bi]
	st := &t.owners[r.slot]
	r.outOne++
	st.weight += WeightUnit
	if !hasFraction {
		return nil
	}
	st.weight -= r.outOne*WeightUnit + r.outDecayed*uint64(r.outW)
	r.outDecayed += r.outOne
	r.outOne, r.outW = 0, w
	st.weight += r.outDecayed * uint64(w)
	t.decay(r.slot, r.tail, w)
	return nil
}

// Free removes the booking: its prefill contribution, its output blocks and
// its references to its prompt blocks. ErrNotFound when id is not live.
func (t *Tracker) Free(id string) error {
	bi, err := t.lookup(id)
	if err != nil {
		return err
	}
	t.free(bi)
	return nil
}

// free releases live booking bi.
func (t *Tracker) free(bi uint32) {
	r := &t.books[bi]
	st := &t.owners[r.slot]
	t.dropPrefill(st, r.prefill, r.ctx)
	st.contexts -= r.prompt
	st.weight -= r.outOne*WeightUnit + r.outDecayed*uint64(r.outW)
	t.release(r.slot, r.tail)

	// Swap-remove from the owner's list.
	last := st.bookings[len(st.bookings)-1]
	st.bookings[r.ownerPos] = last
	t.books[last].ownerPos = r.ownerPos
	st.bookings = st.bookings[:len(st.bookings)-1]

	delete(t.byID, r.id)
	*r = bookingRec{}
	t.freeBooks = append(t.freeBooks, bi)
}

// Lookup returns the owner of live booking id.
func (t *Tracker) Lookup(id string) (kvwire.Owner, bool) {
	bi, ok := t.byID[id]
	if !ok {
		return kvwire.Owner{}, false
	}
	return t.owners[t.books[bi].slot].id, true
}

// Get returns live booking id as the tracker holds it: PrefillTokens is the
// outstanding prefill (0 once PrefillComplete was called) and Hashes is the
// slice given to Add (read it, don't modify it).
func (t *Tracker) Get(id string) (Booking, bool) {
	bi, ok := t.byID[id]
	if !ok {
		return Booking{}, false
	}
	r := &t.books[bi]
	return Booking{
		ID:                   r.id,
		Owner:                t.owners[r.slot].id,
		Hashes:               r.hashes,
		PrefillTokens:        r.prefill,
		ContextTokens:        r.ctx,
		ExpectedOutputTokens: r.expected,
		AdmittedAt:           r.admitted,
	}, true
}

// Expire frees every booking admitted strictly before cutoff (unix nanos)
// and appends their ids to dst, oldest first (ties by id), returning the
// extended slice. The service publishes those frees to its peers.
// Cost O(live bookings).
func (t *Tracker) Expire(cutoff int64, dst []string) []string {
	old := t.scratch[:0]
	for bi := range t.books {
		if r := &t.books[bi]; r.live && r.admitted < cutoff {
			old = append(old, uint32(bi))
		}
	}
	slices.SortFunc(old, func(a, b uint32) int {
		ra, rb := &t.books[a], &t.books[b]
		if c := cmp.Compare(ra.admitted, rb.admitted); c != 0 {
			return c
		}
		return cmp.Compare(ra.id, rb.id)
	})
	for _, bi := range old {
		dst = append(dst, t.books[bi].id)
		t.free(bi)
	}
	t.scratch = old[:0]
	return dst
}
