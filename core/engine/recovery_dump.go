package engine

import (
	"slices"

	"github.com/kvselect/kvselect/core/engine/radix"
	"github.com/kvselect/kvselect/kvwire"
)

// Compact dump records: the streaming /dump and the NATS snapshot server copy a partition's
// index out under the engine lock as fixed-size records plus a shared block slice (no JSON),
// then encode them outside the lock. That keeps the lock hold time to the radix walk itself and
// the transient memory several times below that of the encoded JSON.

// DumpRecord is one replayable stored event of a partition's index: Owner holds the run
// blocks[Start:Start+N] (a chain, each block the child of the previous one) in Tier, under its
// block Parent (the root when !HasParent). Replaying a partition's records in order rebuilds an
// index with the same matches.
type DumpRecord struct {
	Owner     kvwire.Owner
	Tier      kvwire.Tier
	HasParent bool
	Parent    uint64
	Start, N  uint32 // the run in the block slice returned alongside
	// Bridge counts the run's leading placeholder blocks (radix.DumpEvent.Bridge): the record
	// encodes as the stored chain plus a removed event for them.
	Bridge uint32
}

// DumpKeys lists every partition that has an index, sorted by (model, group): the live
// partitions and the recovered indexes still waiting for theirs. A key is listed once.
func (e *Engine) DumpKeys() []PartitionKey {
	keys := make([]PartitionKey, 0, len(e.parts)+len(e.recovery.pending))
	for k := range e.parts {
		keys = append(keys, k)
	}
	for k := range e.recovery.pending {
		if e.parts[k] == nil {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, PartitionKey.Compare)
	return keys
}

// DumpPartitionRecords appends partition key's index to recs and its blocks to blocks,
// breadth-first (a parent's records precede its children's), and returns the block size. A
// recovered index waiting for its partition is dumped too. ok is false when key has no index.
//
// Cost: one radix walk, O(entries) time, plus O(nodes) temporary memory inside the walk.
func (e *Engine) DumpPartitionRecords(key PartitionKey, recs []DumpRecord, blocks []RecoveredBlock) (outRecs []DumpRecord, outBlocks []RecoveredBlock, blockSize uint32, ok bool) {
	var ix *radix.Index
	switch p, r := e.parts[key], e.recovery.pending[key]; {
	case p != nil:
		ix, blockSize = p.index, p.blockSize
	case r != nil:
		ix, blockSize = r.index, r.blockSize
	default:
		return recs, blocks, 0, false
	}
	ix.Dump(func(ev radix.DumpEvent) bool {
		recs = append(recs, DumpRecord{Owner: ev.Owner, Tier: ev.Tier, HasParent: ev.HasParent, Parent: ev.Parent,
			Start: uint32(len(blocks)), N: uint32(len(ev.Blocks)), Bridge: uint32(ev.Bridge)})
		blocks = append(blocks, ev.Blocks...)
		return true
	})
	return recs, blocks, blockSize, true
}

// AppendDumpRecord appends rec (whose run lives in blocks) as its RouterEvent JSON object(s) with
// the given event id: the same bytes AppendStoredEvent writes for the equivalent event.
func AppendDumpRecord(dst []byte, eventID uint64, rec *DumpRecord, blocks []RecoveredBlock) []byte {
	end := uint64(rec.Start) + uint64(rec.N)
	if end > uint64(len(blocks)) {
		end = uint64(len(blocks)) // never for records from DumpPartitionRecords; guards misuse
	}
	return AppendStoredEvent(dst, eventID, radix.DumpEvent{
		Owner: rec.Owner, Tier: rec.Tier, Parent: rec.Parent, HasParent: rec.HasParent, Blocks: blocks[min(uint64(rec.Start), end):end],
		Bridge: int(min(rec.Bridge, rec.N)),
	})
}
