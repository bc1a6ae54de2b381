package load

import (
	"math"

	"github.com/kvselect/kvselect/kvwire"
)

// Tracker is the active-load accounting of one partition: the live bookings
// of all its owners and the prompt trie they share. The zero value is not
// usable; call NewTracker.
//
// A Tracker is single-threaded: the caller serialises every method call
// (see the package documentation). Methods never retain caller memory
// except Booking.Hashes, which Add keeps.
type Tracker struct {
	// Owners. slots maps a known owner to its slot in owners; order lists
	// the live slots sorted by Owner, ids[i] is the Owner of order[i], and
	// ord[slot] is a slot's index in order. freeSlots are dead slots
	// awaiting reuse.
	owners    []ownerState
	slots     map[kvwire.Owner]uint32
	order     []uint32
	ids       []kvwire.Owner
	speeds    []SpeedModel // speeds[i] is the current speed model of ids[i] (SpeedAt)
	ord       []uint32
	freeSlots []uint32
	// version counts owner-set changes (AddOwner of a new owner,
	// RemoveOwner of a known one): ordinals are stable while it is unchanged.
	version uint64

	// Prompt trie (trie.go). nodes[0] is the reserved nilNode; heads maps
	// the first hash of an edge to the head of its same-hash chain.
	nodes     []node
	freeNodes []uint32
	heads     map[uint64]uint32

	// Bookings (booking.go): a slab with a free list, indexed by id.
	books     []bookingRec
	freeBooks []uint32
	byID      map[string]uint32

	// scratch is reused by Expire.
	scratch []uint32

	// pending is the sum of every owner's pending prefills (PendingPrefills), busy the number of
	// owners with at least one (BusyOwners; aggregate.go).
	pending int
	busy    int

	// defaultSpeed is the prior speed model of owners added from now on (SetDefaultSpeed).
	defaultSpeed SpeedModel
	// central caches CentralSpeed (speed_central.go), speedSum SpeedSum (aggregate.go).
	central  centralSpeed
	speedSum speedSum
	// ctx learns the partition's context share from every owner's samples (speed_context.go).
	ctx ctxEstimator
	// reorder learns whether the partition's engines reorder their waiting queues (order.go).
	reorder reorderEstimator

	// Cache heat (heat.go): the window W in tokens (0: off) and the common scale's
	// exponent E.
	heatW, heatE float64
}

// SetDefaultSpeed sets the prior speed model given to owners added from now on (owners already
// known keep theirs; see SetSpeedPrior). An invalid model is ignored.
func (t *Tracker) SetDefaultSpeed(m SpeedModel) {
	if m.Valid() {
		t.defaultSpeed = m
	}
}

// SetContextShare sets the partition's context share prior κ₀ (ContextShareOf a prior model;
// clipped to [0, maxCtx]) and whether samples may move it (speed_context.go); a new tracker has
// κ₀ = 0 and does not learn. Owners are re-fitted at the resulting share.
func (t *Tracker) SetContextShare(prior float64, learn bool) {
	if math.IsNaN(prior) {
		prior = 0
	}
	t.ctx.learn = learn
	t.ctx.setPrior(prior)
	t.refitShare()
}

// ContextShare returns the partition's context share κ.
func (t *Tracker) ContextShare() float64 { return t.ctx.kappa }

// refitShare re-fits every live owner whose share is not the partition's, and republishes it.
func (t *Tracker) refitShare() {
	for s := range t.owners {
		if st := &t.owners[s]; st.live && st.speed.est.kappa != t.ctx.kappa {
			st.speed.est.setKappa(t.ctx.kappa)
			t.publishSpeed(uint32(s))
		}
	}
}

// NewTracker returns an empty tracker with no owners.
func NewTracker() *Tracker {
	t := &Tracker{
		slots: make(map[kvwire.Owner]uint32),
		nodes: make([]node, 1), // nodes[nilNode] is never used
		heads: make(map[uint64]uint32),
		byID:  make(map[string]uint32),
	}
	t.ctx.setPrior(0)
	return t
}

// Len returns the number of live bookings.
func (t *Tracker) Len() int { return len(t.byID) }

// PendingPrefills returns the number of live bookings, over all owners, whose prefill has not
// completed (the sum of every owner's RankLoad.PendingPrefills). Cost O(1).
func (t *Tracker) PendingPrefills() int { return t.pending }
