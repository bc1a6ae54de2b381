package engine

import (
	"cmp"
	"slices"

	"github.com/kvselect/kvselect/core/engine/radix"
)

// Compact dump records: the streaming /dump and the NATS snapshot server copy a partition's
// index out under the engine lock as fixed-size records (48 bytes per entry and tier, no JSON),
// then encode them outside the lock. That keeps the lock hold time to the radix walk itself and
// the transient memory about four times below that of the encoded JSON.

// DumpRecord is one replayable single-block stored event of a partition's index: Owner holds
// Block in Tier, under its block Parent (the root when !HasParent). Replaying a partition's
// records in order with stored events rebuilds an index with the same matches.
type DumpRecord struct {
	Owner     Owner
	Tier      Tier
	HasParent bool
	Parent    uint64
	Block     RecoveredBlock
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
	slices.SortFunc(keys, func(a, b PartitionKey) int {
		if c := cmp.Compare(a.Model, b.Model); c != 0 {
			return c
		}
		return cmp.Compare(a.Group, b.Group)
	})
	return keys
}

// DumpPartitionRecords appends partition key's index to dst as records, breadth-first (a
// parent's records precede its children's), and returns the block size. A recovered index
// waiting for its partition is dumped too. ok is false when key has no index.
//
// Cost: one radix walk, O(entries) time, plus O(nodes) temporary memory inside the walk.
func (e *Engine) DumpPartitionRecords(key PartitionKey, dst []DumpRecord) (out []DumpRecord, blockSize uint32, ok bool) {
	var ix *radix.Index
	switch p, r := e.parts[key], e.recovery.pending[key]; {
	case p != nil:
		ix, blockSize = p.index, p.blockSize
	case r != nil:
		ix, blockSize = r.index, r.blockSize
	default:
		return dst, 0, false
	}
	ix.Dump(func(ev radix.DumpEvent) bool {
		for _, b := range ev.Blocks {
			dst = append(dst, DumpRecord{Owner: ev.Owner, Tier: ev.Tier, HasParent: ev.HasParent, Parent: ev.Parent, Block: b})
		}
		return true
	})
	return dst, blockSize, true
}

// AppendDumpRecord appends rec as one RouterEvent JSON object with the given event id (the same
// bytes AppendStoredEvent writes for the equivalent single-block event).
func AppendDumpRecord(dst []byte, eventID uint64, rec *DumpRecord) []byte {
	blk := [1]radix.StoredBlock{rec.Block}
	return AppendStoredEvent(dst, eventID, radix.DumpEvent{
		Owner: rec.Owner, Tier: rec.Tier, Parent: rec.Parent, HasParent: rec.HasParent, Blocks: blk[:],
	})
}
