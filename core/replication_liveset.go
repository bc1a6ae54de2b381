package core

import (
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core/engine"
)

// Live sets: the repair of lost frees.
//
// Republishing admissions (replication_resync.go) repairs admissions a peer missed, but a free
// or the last word on a booking can be lost too — published while the connection was down, or
// dropped by a full queue on either side — and the peer then counts a booking that no longer
// exists until the 300 s expiry guard reclaims it, steering selections away from a rank that is
// in fact idle. So each replica also announces, per partition, the ids of every live booking
// it admitted itself (its ledger), and a peer frees the bookings it mirrors from that replica
// in that partition which the announcement does not list.
//
// Why this is safe without sequencing: a replica builds the announcement from its ledger under
// Service.mu and enqueues every chunk of every partition's set in that one lock hold; its
// lifecycle events are enqueued under the same lock and the bus publishes its queue in order
// on one subject, which NATS delivers in order to each subscriber. So when a peer has the whole
// set, every admission of the sender it has applied was either made before the set was built —
// and is listed unless it was freed — or comes after the set in the stream and has not been
// applied yet. An admission the peer never received is not repaired here (the next republish
// pass does that); a lost chunk leaves the set incomplete and it is ignored.
//
// Announcements go out at the end of every republish pass (reconnects, peers joining) and every
// LiveSetInterval. Each partition the engine knows is announced, an empty set included, so a
// peer also learns that everything it mirrors from the sender there is gone.
//
// The same announcement reveals admissions a peer missed: ids listed that it neither mirrors
// nor saw freed. It then asks the sender to republish (a ResyncRequest), at most once per
// resyncRequestGap, the gap doubling up to maxResyncRequestGap while ids stay missing (a peer
// that cannot apply them — its catalog lacks their worker — must not make the sender republish
// every 30 s forever) and resetting once nothing is missing.

const (
	// DefaultLiveSetInterval is how often a replica announces its live sets between passes.
	DefaultLiveSetInterval = 30 * time.Second
	// liveSetChunk is the most ids one live-set message carries (a 2048-id chunk of 40-byte
	// ids is about 90 KB, far below NATS's default 1 MB payload limit).
	liveSetChunk = 2048
	// maxLiveSetChunks bounds what a receiver is willing to reassemble (4M ids).
	maxLiveSetChunks = 2048
	// maxLiveSetIDs bounds the ids of one set a receiver collects.
	maxLiveSetIDs = maxLiveSetChunks * liveSetChunk
	// resyncRequestGap and maxResyncRequestGap bound how often a replica asks one peer to
	// republish (see above).
	resyncRequestGap    = 10 * time.Second
	maxResyncRequestGap = 10 * time.Minute
	// DefaultMaxPendingLiveSets bounds the partially received multi-chunk sets a receiver
	// keeps (a single-chunk set is applied at once and never waits); the oldest is evicted.
	DefaultMaxPendingLiveSets = 1024
	// DefaultMaxPendingLiveSetBytes bounds the estimated memory of all partial sets together
	// (pendingIDBytes per id); beyond it the oldest partial sets are evicted.
	DefaultMaxPendingLiveSetBytes = 64 << 20
	// maxChunkIDs is the most ids a receiver accepts in one chunk (senders put liveSetChunk).
	maxChunkIDs = 2 * liveSetChunk
	// pendingIDOverhead estimates the bytes one id costs in a pending set beyond its length
	// (string header and map slot).
	pendingIDOverhead = 48
)

// liveSetKey identifies a sender's set for one partition.
type liveSetKey struct {
	sender string
	part   engine.PartitionKey
}

// pendingLiveSet is a set being reassembled from its chunks.
type pendingLiveSet struct {
	setID  uint64
	chunks uint32
	seen   map[uint32]struct{}
	ids    map[string]struct{}
	bytes  int64  // estimated memory of ids (counted in BusReplicator.pendingBytes)
	seq    uint64 // arrival order of the first chunk: the smallest is the oldest
}

// pendingBounds are the receiver's limits on partial live sets (guarded by Service.mu).
type pendingBounds struct {
	maxSets  int
	maxBytes int64
	bytes    int64  // estimated memory of every pending set
	seq      uint64 // last pendingLiveSet.seq handed out
}

// sets and budget are the limits, with defaults for zero values.
func (b *pendingBounds) sets() int {
	if b.maxSets <= 0 {
		return DefaultMaxPendingLiveSets
	}
	return b.maxSets
}

func (b *pendingBounds) budget() int64 {
	if b.maxBytes <= 0 {
		return DefaultMaxPendingLiveSetBytes
	}
	return b.maxBytes
}

// liveSetStats counts live-set traffic (guarded by Service.mu).
type liveSetStats struct {
	announced uint64 // sets this replica announced (one per partition per announcement)
	applied   uint64 // complete peer sets applied
	freed     uint64 // mirrored bookings freed because a peer's set did not list them
	missing   uint64 // ids peers' sets listed that this replica did not mirror
	requested uint64 // resync requests sent
	asked     uint64 // resync requests received
	evicted   uint64 // partial sets evicted (oldest first) to stay within the bounds
	rejected  uint64 // chunks refused: too many chunks or ids for a set a replica sends
}

// resyncAsk is the request pacing for one peer (guarded by Service.mu).
type resyncAsk struct {
	next time.Time     // no request before
	gap  time.Duration // the wait after the next request
}

// publishLiveSetsLocked announces every partition's live set. Called with Service.mu held.
func (br *BusReplicator) publishLiveSetsLocked() {
	keys := br.svc.eng.DumpPartitionKeys()
	byPart := make(map[engine.PartitionKey][]string, len(keys))
	for _, k := range keys {
		byPart[k] = nil
	}
	for id, e := range br.ledger {
		if _, known := byPart[e.key]; known {
			byPart[e.key] = append(byPart[e.key], id)
		}
	}
	br.liveSetSeq++
	setID := br.liveSetSeq
	for _, k := range keys {
		ids := byPart[k]
		chunks := max(1, (len(ids)+liveSetChunk-1)/liveSetChunk)
		for c := range chunks {
			part := ids[min(c*liveSetChunk, len(ids)):min((c+1)*liveSetChunk, len(ids))]
			br.r.PublishLiveSet(&bus.LiveSet{Model: k.Model, Group: k.Group, SetID: setID,
				Chunk: uint32(c), Chunks: uint32(chunks), IDs: part})
		}
		br.liveSets.announced++
	}
}

// applyLiveSet collects a peer's live-set chunk and, once the set is complete, frees the
// bookings mirrored from that peer in that partition that the set does not list. Runs on the
// bus dispatcher goroutine, in order with the peer's lifecycle events.
func (br *BusReplicator) applyLiveSet(ls *bus.LiveSet) {
	s := br.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	if ls.Chunks > maxLiveSetChunks || len(ls.IDs) > maxChunkIDs {
		br.liveSets.rejected++
		return
	}
	k := liveSetKey{sender: ls.Sender, part: engine.PartitionKey{Model: ls.Model, Group: ls.Group}}
	p := br.pendingSets[k]
	if p == nil || p.setID != ls.SetID || p.chunks != ls.Chunks {
		br.dropPending(k) // superseded by a newer set (or a restart's)
		p = &pendingLiveSet{setID: ls.SetID, chunks: ls.Chunks, seen: map[uint32]struct{}{}, ids: make(map[string]struct{}, len(ls.IDs))}
		if ls.Chunks > 1 {
			for len(br.pendingSets) > 0 && len(br.pendingSets) >= br.bounds.sets() {
				br.evictOldestPending()
			}
			br.bounds.seq++
			p.seq = br.bounds.seq
			br.pendingSets[k] = p
		}
	}
	if _, dup := p.seen[ls.Chunk]; dup {
		return
	}
	p.seen[ls.Chunk] = struct{}{}
	for _, id := range ls.IDs {
		if _, ok := p.ids[id]; !ok {
			p.ids[id] = struct{}{}
			if ls.Chunks > 1 {
				n := int64(len(id) + pendingIDOverhead)
				p.bytes += n
				br.bounds.bytes += n
			}
		}
	}
	if len(p.ids) > maxLiveSetIDs {
		br.dropPending(k) // not a set a well-behaved replica sends
		br.liveSets.rejected++
		return
	}
	for br.bounds.bytes > br.bounds.budget() && len(br.pendingSets) > 0 {
		if br.evictOldestPending() == k {
			return // this set itself was the oldest
		}
	}
	if uint32(len(p.seen)) < p.chunks {
		return
	}
	br.dropPending(k)
	br.liveSetScratch = s.eng.DropPeerExcept(k.sender, k.part, p.ids, br.liveSetScratch[:0])
	now := s.clock()
	for _, id := range br.liveSetScratch {
		br.tomb.add(id, now)
	}
	br.liveSets.applied++
	br.liveSets.freed += uint64(len(br.liveSetScratch))
	br.askForMissing(k.sender, p.ids, now)
	if n := len(br.liveSetScratch); n > 0 {
		br.log.Info("freed peer bookings its live set no longer lists (their frees were lost)",
			"peer", k.sender, "model", k.part.Model, "routing_group", k.part.Group, "bookings", n)
		s.drainPartLocked(k.part)
	}
	clear(br.liveSetScratch)
}

// askForMissing asks sender to republish when its set lists ids this replica neither mirrors
// nor saw freed, paced per peer (see the top of this file). Called with Service.mu held.
func (br *BusReplicator) askForMissing(sender string, ids map[string]struct{}, now time.Time) {
	s := br.svc
	cutoff := now.Add(-s.eng.Config().ActiveRequestExpiry)
	missing := 0
	for id := range ids {
		if !s.eng.HasReservation(id) && !br.tomb.freed(id, cutoff) {
			missing++
		}
	}
	ask := br.asks[sender]
	if missing == 0 {
		if ask != nil {
			ask.gap = resyncRequestGap
		}
		return
	}
	br.liveSets.missing += uint64(missing)
	if ask == nil {
		ask = &resyncAsk{gap: resyncRequestGap}
		br.asks[sender] = ask
	}
	if now.Before(ask.next) {
		return
	}
	ask.next = now.Add(ask.gap)
	ask.gap = min(2*ask.gap, maxResyncRequestGap)
	br.liveSets.requested++
	br.log.Info("peer holds bookings this replica missed; asking it to republish", "peer", sender, "missing", missing)
	br.r.PublishResyncRequest(sender)
}

// resyncRequested schedules a republish pass for a peer that asked for one (bus dispatcher
// goroutine; requests coalesce with other scheduled passes).
func (br *BusReplicator) resyncRequested(from string) {
	br.svc.mu.Lock()
	br.liveSets.asked++
	br.svc.mu.Unlock()
	br.rs.request(br.rs.joinDelay)
}

// dropPendingSets forgets the partial sets of a peer (it restarted, left or expired: its sets
// will not be completed). Called with Service.mu held.
func (br *BusReplicator) dropPendingSets(sender string) {
	for k := range br.pendingSets {
		if k.sender == sender {
			br.dropPending(k)
		}
	}
	delete(br.asks, sender)
}

// dropPending forgets one partial set and its bytes. Called with Service.mu held.
func (br *BusReplicator) dropPending(k liveSetKey) {
	if p := br.pendingSets[k]; p != nil {
		br.bounds.bytes -= p.bytes
		delete(br.pendingSets, k)
	}
}

// evictOldestPending evicts the partial set whose first chunk arrived first and returns its
// key. The scan is linear in the pending sets (at most maxSets). Service.mu held.
func (br *BusReplicator) evictOldestPending() liveSetKey {
	var oldest liveSetKey
	var seq uint64
	first := true
	for k, p := range br.pendingSets {
		if first || p.seq < seq {
			oldest, seq, first = k, p.seq, false
		}
	}
	br.dropPending(oldest)
	br.liveSets.evicted++
	return oldest
}

// PendingLiveSetStats reports the partial live sets held and what the bounds did.
type PendingLiveSetStats struct {
	Sets     int    // partial sets held
	Bytes    int64  // their estimated memory
	Evicted  uint64 // partial sets evicted, oldest first
	Rejected uint64 // chunks refused as oversized
}

// PendingLiveSetStats reports the partial live sets held and what the bounds did.
func (br *BusReplicator) PendingLiveSetStats() PendingLiveSetStats {
	br.svc.mu.Lock()
	defer br.svc.mu.Unlock()
	return PendingLiveSetStats{Sets: len(br.pendingSets), Bytes: br.bounds.bytes, Evicted: br.liveSets.evicted, Rejected: br.liveSets.rejected}
}
