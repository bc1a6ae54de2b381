package load

import (
	"slices"

	"github.com/kvselect/kvselect/kvwire"
)

// RankLoad is the load of one owner as the cost function and /loads see it.
type RankLoad struct {
	Owner kvwire.Owner
	// ActivePrefillTokens is the sum of PrefillTokens of the owner's live
	// bookings whose prefill has not completed.
	ActivePrefillTokens uint64
	// ActiveBlocks is round(sum of the weights of the owner's live prompt
	// blocks, de-duplicated, and of its bookings' output blocks).
	ActiveBlocks uint64
	// ActiveRequests is the number of live bookings on the owner.
	ActiveRequests int
	// PendingPrefills is the number of live bookings whose prefill has not completed (and had
	// prefill tokens), and PrefillSquares the sum of their PrefillTokens squared (each capped at
	// 2^31 tokens): with ActivePrefillTokens they let a cost model estimate queued prefill
	// time under a quadratic prefill-time model.
	PendingPrefills int
	PrefillSquares  uint64
	// PrefillCross is the sum over those prefills of PrefillTokens × ContextTokens (each capped
	// at 2^31): with the speed model's K it prices their attention to cached context.
	PrefillCross uint64
	// Speed is the owner's published prefill-speed model: learned from its prefill completions
	// (speedtrack.go), zero ("unknown") until it has TrustedSamples of them.
	Speed SpeedModel
	// CacheHeat is the owner's recent prompt tokens, cached and uncached, in the tracker's
	// common scale (heat.go): comparable with other owners' read at the same moment, nothing
	// else; 0 with heat tracking off.
	CacheHeat float64
	// ContextTokens is the sum over the owner's live bookings of their prompt tokens
	// (PrefillTokens + ContextTokens at booking, each capped at 2^31), a prefix shared by
	// several of them counted once per booking: the context their decode attention reads
	// every step, where ActiveBlocks counts a shared block once (the memory it pins).
	ContextTokens uint64
}

// ownerState is the per-owner aggregate. Slots are indices into
// Tracker.owners; a slot is stable for the owner's lifetime and reused only
// after RemoveOwner has released every trie entry and booking that named it.
type ownerState struct {
	id   kvwire.Owner
	live bool
	// prefill is the sum of prefill of the owner's live bookings; pending counts those with
	// outstanding prefill, squares sums their prefill² and cross their prefill × cached context
	// (Booking.ContextTokens), capped per booking by sqCap.
	prefill uint64
	pending int
	squares uint64
	cross   uint64
	// weight is the fixed-point sum (WeightUnit per block) of the owner's
	// live prompt-entry weights × edge lengths plus its output weights.
	weight uint64
	// bookings lists the booking slab indices of the owner's live bookings;
	// bookingRec.ownerPos is each one's position here (swap-remove).
	bookings []uint32
	// speed learns the owner's prefill speed (speedtrack.go).
	speed speedState
	// heat is the owner's cache heat in the tracker's common scale (heat.go).
	heat float64
	// contexts sums the live bookings' prompt tokens (bookingRec.prompt; RankLoad.ContextTokens).
	contexts uint64
	// order observes the owner's first-token order (order.go).
	order orderState
}

// AddOwner makes o known to the tracker so that bookings may name it. It is
// idempotent: adding a known owner changes nothing. Cost O(owners).
func (t *Tracker) AddOwner(o kvwire.Owner) {
	if _, ok := t.slots[o]; ok {
		return
	}
	var slot uint32
	if n := len(t.freeSlots); n > 0 {
		slot = t.freeSlots[n-1]
		t.freeSlots = t.freeSlots[:n-1]
	} else {
		slot = uint32(len(t.owners))
		t.owners = append(t.owners, ownerState{})
		t.ord = append(t.ord, 0)
	}
	st := &t.owners[slot]
	st.id, st.live, st.prefill, st.weight, st.pending, st.squares, st.cross, st.heat, st.contexts = o, true, 0, 0, 0, 0, 0, 0, 0
	st.order = orderState{}
	st.bookings = st.bookings[:0]
	st.speed = speedState{}
	st.speed.est.reset(t.defaultSpeed, t.ctx.kappa)
	t.slots[o] = slot

	at, _ := slices.BinarySearchFunc(t.ids, o, kvwire.Owner.Compare)
	t.order = slices.Insert(t.order, at, slot)
	t.ids = slices.Insert(t.ids, at, o)
	t.speeds = slices.Insert(t.speeds, at, st.speed.published())
	t.renumber(at)
	t.version++
}

// RemoveOwner drops o: every booking it held is freed (its prompt blocks
// released, its prefill and output blocks forgotten) and o becomes unknown.
// It returns the ids of those bookings in ascending order, or nil when o was
// not known. Later lifecycle calls for those ids return ErrNotFound.
func (t *Tracker) RemoveOwner(o kvwire.Owner) []string {
	slot, ok := t.slots[o]
	if !ok {
		return nil
	}
	st := &t.owners[slot]
	ids := make([]string, 0, len(st.bookings))
	// free swap-removes from st.bookings, so always take the last one.
	for len(st.bookings) > 0 {
		bi := st.bookings[len(st.bookings)-1]
		ids = append(ids, t.books[bi].id)
		t.free(bi)
	}
	slices.Sort(ids)

	at := int(t.ord[slot])
	t.order = slices.Delete(t.order, at, at+1)
	t.ids = slices.Delete(t.ids, at, at+1)
	t.speeds = slices.Delete(t.speeds, at, at+1)
	t.renumber(at)
	t.version++
	delete(t.slots, o)
	st.live, st.prefill, st.weight, st.pending, st.squares, st.cross = false, 0, 0, 0, 0, 0
	t.freeSlots = append(t.freeSlots, slot)
	return ids
}

// HasOwner reports whether o is known (added and not removed).
func (t *Tracker) HasOwner(o kvwire.Owner) bool {
	_, ok := t.slots[o]
	return ok
}

// Owners returns the number of known owners.
func (t *Tracker) Owners() int { return len(t.order) }

// renumber refreshes ord for order[from:], after an insertion or deletion
// at from.
func (t *Tracker) renumber(from int) {
	for i := from; i < len(t.order); i++ {
		t.ord[t.order[i]] = uint32(i)
	}
}

// Load returns o's current load. An unknown owner has zero load.
func (t *Tracker) Load(o kvwire.Owner) RankLoad {
	slot, ok := t.slots[o]
	if !ok {
		return RankLoad{Owner: o}
	}
	return t.loadOf(slot)
}

// Loads appends the load of every known owner to dst, sorted by
// (Worker, Rank), and returns the extended slice. It allocates only when dst
// lacks capacity.
func (t *Tracker) Loads(dst []RankLoad) []RankLoad {
	n := len(dst)
	dst = slices.Grow(dst, len(t.order))[:n+len(t.order)]
	for i, slot := range t.order {
		t.fill(&dst[n+i], slot) // in place: no temporary struct copies
	}
	return dst
}

func (t *Tracker) loadOf(slot uint32) (l RankLoad) {
	t.fill(&l, slot)
	return l
}

// fill writes the load of the owner in slot to d: the one place a RankLoad is assembled.
func (t *Tracker) fill(d *RankLoad, slot uint32) {
	st := &t.owners[slot]
	d.Owner, d.ActivePrefillTokens, d.ActiveBlocks = st.id, st.prefill, roundBlocks(st.weight)
	d.ActiveRequests, d.PendingPrefills, d.PrefillSquares = len(st.bookings), st.pending, st.squares
	d.PrefillCross, d.ContextTokens = st.cross, st.contexts
	d.Speed = st.speed.published()
	d.CacheHeat = 0
	if t.heatW > 0 {
		d.CacheHeat = st.heat
	}
}
