package engine

import (
	"time"

	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// predictedIndex is the side index router_predicted_ttl_secs enables (Dynamo's predict-on-route
// side indexer): with KV events on, every local booking also records its prompt's blocks on the
// chosen rank for the TTL, so the requests that follow see the prefix there before the engine's
// KV events for it arrive (they come only once the prefill is done). The event-fed index stays
// authoritative; at every overlap query the side index's device overlap is merged in by
// per-rank maximum (absorb), and entries past their TTL are dropped at every selection, booking
// and Sweep (queries that take no time, such as overlap_scores, see them until then).
//
// It is fed only by this replica's bookings (never by peers' mirrored ones, nor by KV events)
// and forgets a rank when its worker leaves; it is not dumped or recovered.
//
// Invariants: index holds exactly the (owner, block) pairs ttl still tracks; the scratch fields
// are used within one call and hold nothing between calls.
type predictedIndex struct {
	index *radix.Index
	ttl   *approxTTL
	slots slotCache

	ov     []radix.Counts // merge scratch: the side index's counts per candidate
	match  radix.Match
	merged []radix.OwnerMatch
}

// matches runs the event index's Match for blocks into m and returns its per-owner matches,
// with the predicted side index merged in when there is one (see mergeOwners for validity).
func (p *partition) matches(blocks []uint64, m *radix.Match) []radix.OwnerMatch {
	p.index.Match(blocks, m)
	if p.predicted == nil {
		return m.Owners
	}
	return p.predicted.mergeOwners(blocks, m.Owners)
}

func newPredictedIndex() *predictedIndex {
	return &predictedIndex{index: radix.New(), ttl: newApproxTTL()}
}

// record stores blocks (public block hashes) on o until deadline (Unix ns).
func (s *predictedIndex) record(o kvwire.Owner, blocks []uint64, deadline int64) {
	s.ttl.record(s.index, o, blocks, deadline)
}

// expire drops every recording whose deadline is at or before now (Unix ns).
func (s *predictedIndex) expire(now int64) { s.ttl.expire(s.index, now) }

// expirePredicted drops p's predictions that are past their TTL at now (no-op without them).
func (p *partition) expirePredicted(now time.Time) {
	if p.predicted != nil {
		p.predicted.expire(now.UnixNano())
	}
}

// dropOwner forgets rank o (its worker left or changed shape).
func (s *predictedIndex) dropOwner(o kvwire.Owner) {
	s.index.ClearOwner(o)
	s.ttl.dropOwner(o)
}

// mergeSlots raises ov[i]'s device count to the side index's for every candidate i, where ov
// was filled by the event index's MatchSlots for the same blocks and owners are p's candidates.
func (s *predictedIndex) mergeSlots(p *partition, blocks []uint64, ov []radix.Counts) {
	if s.index.Owners() == 0 {
		return
	}
	side := resize(s.ov, len(ov))
	clear(side)
	s.ov = side
	s.index.MatchSlots(blocks, &s.match, s.slots.table(s.index, p.owners), side)
	for i := range ov {
		absorb(&ov[i], side[i][kvwire.TierDevice])
	}
}

// absorb raises c's device count to dev, a predicted device prefix. c holds a device count and
// lower-tier extensions beyond it (host, then disk, then external), so the prefixes they cover
// are cumulative; the extensions shrink by what the device prefix now covers, in tier order,
// and no block is counted twice.
func absorb(c *radix.Counts, dev int32) {
	grow := dev - c[kvwire.TierDevice]
	if grow <= 0 {
		return
	}
	c[kvwire.TierDevice] = dev
	for t := kvwire.TierDevice + 1; t < kvwire.NumTiers && grow > 0; t++ {
		take := min(grow, c[t])
		c[t] -= take
		grow -= take
	}
}

// mergeOwners returns the event index's per-owner matches (sorted by owner) with the side
// index's device overlap merged in by maximum; an owner only the side index matches appears
// with its device count alone. The result is sorted by owner and valid until the next call.
func (s *predictedIndex) mergeOwners(blocks []uint64, primary []radix.OwnerMatch) []radix.OwnerMatch {
	if s.index.Owners() == 0 {
		return primary
	}
	s.index.Match(blocks, &s.match)
	side := s.match.Owners
	out := s.merged[:0]
	i, j := 0, 0
	for i < len(primary) || j < len(side) {
		switch {
		case j == len(side) || (i < len(primary) && primary[i].Owner.Compare(side[j].Owner) < 0):
			out = append(out, primary[i])
			i++
		case i == len(primary) || side[j].Owner.Compare(primary[i].Owner) < 0:
			out = append(out, radix.OwnerMatch{Owner: side[j].Owner, Device: side[j].Device})
			j++
		default:
			m := primary[i]
			c := radix.Counts{m.Device, m.HostExt, m.DiskExt, m.ExternalExt}
			absorb(&c, side[j].Device)
			m.Device, m.HostExt, m.DiskExt, m.ExternalExt = c[0], c[1], c[2], c[3]
			out = append(out, m)
			i, j = i+1, j+1
		}
	}
	s.merged = out
	return out
}
