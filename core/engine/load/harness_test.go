package load

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/kvselect/kvselect/kvwire"
)

// chooser is the source of decisions of the op-sequence harness: a seeded
// PRNG for property tests, fuzz bytes for the fuzz target.
type chooser interface {
	intn(n int) int
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int { return c.r.IntN(n) }

// byteChooser reads decisions from fuzz input; once the input is used up
// every decision is 0.
type byteChooser struct {
	data []byte
}

func (c *byteChooser) intn(n int) int {
	if len(c.data) == 0 {
		return 0
	}
	b := int(c.data[0])
	c.data = c.data[1:]
	return b % n
}

// mix is splitmix64's finaliser: a bijection with good avalanche, used to
// build chained test hashes.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// chain turns a sequence of block contents into chained tracking hashes:
// each hash commits to the whole prefix, as Dynamo's sequence hashes do.
func chain(blocks []uint64) []uint64 {
	out := make([]uint64, len(blocks))
	var prev uint64 = 0x9e3779b97f4a7c15
	for i, b := range blocks {
		prev = mix(prev*31 + b + 1)
		out[i] = prev
	}
	return out
}

// harness drives a Tracker and the naive reference with the same operations
// and compares every observable after each one.
type harness struct {
	c       chooser
	t       *Tracker
	ref     *refTracker
	m       PrefixMatch
	workers int // owner pool: workers × 2 ranks
	ids     int // id pool size
	steps   int
	onQuery func(m *PrefixMatch) // optional: sees every ActivePrefix answer
	system  bool                 // most prompts start with the same block
	mix     opMix
}

func newHarness(c chooser) *harness {
	return &harness{c: c, t: NewTracker(), ref: newRef(), workers: 3, ids: 16, mix: defaultMix}
}

// opMix weighs the operations the harness draws, in percent: AddOwner,
// RemoveOwner, Add, PrefillComplete, OutputBlock, Free; Expire takes the
// rest.
type opMix [6]int

var (
	defaultMix = opMix{6, 3, 36, 10, 20, 20}
	// wideMix keeps many bookings live: few frees, owner removals, expiries.
	wideMix = opMix{2, 1, 50, 10, 20, 16}
)

// newWideHarness has 48 owners, 160 ids and a common first block, so that
// prompts are often live
// on denseMin owners or more and ActivePrefix takes its dense path.
func newWideHarness(c chooser) *harness {
	return &harness{c: c, t: NewTracker(), ref: newRef(), workers: 24, ids: 160, system: true, mix: wideMix}
}

func (h *harness) owner() kvwire.Owner {
	return kvwire.Owner{Worker: uint64(1 + h.c.intn(h.workers+1)), Rank: uint32(h.c.intn(2))} // worker 4 is rarely added
}

func (h *harness) id() string { return fmt.Sprintf("r%d", h.c.intn(h.ids)) }

// prompt draws a prompt from a small block alphabet so prompts share and
// diverge often.
func (h *harness) prompt() []uint64 {
	n := h.c.intn(9)
	blocks := make([]uint64, n)
	for i := range blocks {
		blocks[i] = uint64(h.c.intn(3))
	}
	if h.system && n > 0 && h.c.intn(8) != 0 {
		blocks[0] = 0
	}
	return chain(blocks)
}

var fractions = []float64{0, 0.25, 0.5, 0.1, 0.3, 1, 0.333, -0.5, 1.5, math.NaN()}

// step applies one random operation and checks the tracker against the
// reference.
func (h *harness) step() error {
	h.steps++
	var err error
	op, mx := h.c.intn(100), h.mix
	for i := 1; i < len(mx); i++ {
		mx[i] += mx[i-1] // cumulative thresholds
	}
	switch {
	case op < mx[0]:
		o := h.owner()
		h.t.AddOwner(o)
		h.ref.addOwner(o)
	case op < mx[1]:
		o := h.owner()
		got, want := h.t.RemoveOwner(o), h.ref.removeOwner(o)
		if !slices.Equal(got, want) {
			return fmt.Errorf("RemoveOwner(%v) = %v, reference %v", o, got, want)
		}
	case op < mx[2]:
		prefill := []uint64{0, 4, 100, math.MaxUint64/2 + 1}[h.c.intn(4)]
		ctx := []uint64{0, 7, 3000, math.MaxUint64}[h.c.intn(4)]
		b := Booking{ID: h.id(), Owner: h.owner(), Hashes: h.prompt(), PrefillTokens: prefill, ContextTokens: ctx,
			ExpectedOutputTokens: uint32(h.c.intn(100)), AdmittedAt: int64(h.c.intn(100))}
		err = sameErr(h.t.Add(b), h.ref.add(b))
	case op < mx[3]:
		id := h.id()
		err = sameErr(h.t.PrefillComplete(id), h.ref.prefillComplete(id))
	case op < mx[4]:
		id := h.id()
		f, has := fractions[h.c.intn(len(fractions))], h.c.intn(2) == 0
		err = sameErr(h.t.OutputBlock(id, uint64(h.steps), f, has), h.ref.outputBlock(id, f, has))
	case op < mx[5]:
		id := h.id()
		err = sameErr(h.t.Free(id), h.ref.free(id))
	default:
		cutoff := int64(h.c.intn(100))
		got, want := h.t.Expire(cutoff, nil), h.ref.expire(cutoff)
		if !slices.Equal(got, want) {
			return fmt.Errorf("Expire(%d) = %v, reference %v", cutoff, got, want)
		}
	}
	if err != nil {
		return err
	}
	return h.compare()
}

// compare checks every observable of the tracker against the reference.
func (h *harness) compare() error {
	if err := h.t.checkInvariants(); err != nil {
		return fmt.Errorf("invariant: %w", err)
	}
	if got, want := h.t.Loads(nil), h.ref.loads(); !slices.Equal(got, want) {
		return fmt.Errorf("Loads = %+v, reference %+v", got, want)
	}
	for w := 1; w <= h.workers+1; w++ {
		for r := range 2 {
			o := kvwire.Owner{Worker: uint64(w), Rank: uint32(r)}
			if got, want := h.t.Load(o), h.ref.load(o); got != want {
				return fmt.Errorf("Load(%v) = %+v, reference %+v", o, got, want)
			}
			if h.t.HasOwner(o) != (h.ref.owners[o] != nil) {
				return fmt.Errorf("HasOwner(%v) disagrees", o)
			}
		}
	}
	if h.t.Len() != len(h.ref.bookings) {
		return fmt.Errorf("Len = %d, reference %d", h.t.Len(), len(h.ref.bookings))
	}
	for i := range h.ids {
		id := fmt.Sprintf("r%d", i)
		o, ok := h.t.Lookup(id)
		b := h.ref.bookings[id]
		if ok != (b != nil) || (ok && o != b.owner) {
			return fmt.Errorf("Lookup(%q) = %v %v, reference %v", id, o, ok, b)
		}
	}
	// Queries: a fresh prompt and up to 12 live prompts (all of them when
	// few are live), picked deterministically.
	queries := [][]uint64{h.prompt()}
	if len(h.ref.bookings) <= 12 {
		for _, b := range h.ref.bookings {
			queries = append(queries, b.hashes)
		}
	} else {
		for range 12 {
			if b := h.ref.bookings[fmt.Sprintf("r%d", h.c.intn(h.ids))]; b != nil {
				queries = append(queries, b.hashes)
			}
		}
	}
	for _, q := range queries {
		h.t.ActivePrefix(q, &h.m)
		if h.onQuery != nil {
			h.onQuery(&h.m)
		}
		got, want := h.m.Entries(), h.ref.activePrefix(q)
		if !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
			return fmt.Errorf("ActivePrefix(%x) = %+v, reference %+v", q, got, want)
		}
		for _, e := range want {
			if h.m.Blocks(e.Owner) != e.Blocks {
				return fmt.Errorf("Blocks(%v) = %d, want %d", e.Owner, h.m.Blocks(e.Owner), e.Blocks)
			}
		}
	}
	return nil
}
