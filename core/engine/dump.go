package engine

import (
	"slices"
	"strconv"

	"github.com/kvselect/kvselect/core/engine/radix"
)

// The /dump snapshot is Dynamo's standalone-indexer recovery format (spec §11.2):
//
//	{"<model>:<routing_group>": {"block_size": N, "events": [RouterEvent, ...]}, ...}
//
// where each RouterEvent replays one stored chain of one owner in one tier:
//
//	{"worker_id":1,"storage_tier":"device","event":{"event_id":0,"data":{"stored":{
//	  "parent_hash":null,"start_position":null,"blocks":[{"block_hash":H,"tokens_hash":T,
//	  "mm_extra_info":null}]}},"dp_rank":0}}
//
// Hashes are unsigned JSON integers here (unlike the signed hashes of the selection API).
//
// An entry its owner holds below a block it removed (radix.DumpEvent.Bridge) is dumped as a
// stored chain that bridges the gap with placeholder blocks, immediately followed by a removed
// event for the placeholders:
//
//	{"worker_id":1,"storage_tier":"device","event":{"event_id":7,"data":{"removed":{
//	  "block_hashes":[P]}},"dp_rank":0}}
//
// so that any consumer replaying the events in order (kvselect, Dynamo's indexer) ends with
// exactly the entries of the source: the owner holds the blocks below the gap, and not the gap.

// DumpPartitionKeys lists the partitions that have an index, sorted.
func (e *Engine) DumpPartitionKeys() []PartitionKey {
	keys := make([]PartitionKey, 0, len(e.parts))
	for k := range e.parts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, PartitionKey.Compare)
	return keys
}

// DumpPartition encodes a partition's index as the JSON array of RouterEvents, appending to
// dst, and returns the block size. ok is false for an unknown partition. Event ids count from
// first.
func (e *Engine) DumpPartition(key PartitionKey, dst []byte) (out []byte, blockSize uint32, events int, ok bool) {
	p := e.parts[key]
	if p == nil {
		return dst, 0, 0, false
	}
	dst = append(dst, '[')
	p.index.Dump(func(ev radix.DumpEvent) bool {
		if events > 0 {
			dst = append(dst, ',')
		}
		dst = AppendStoredEvent(dst, uint64(events), ev)
		events++
		return true
	})
	dst = append(dst, ']')
	return dst, p.blockSize, events, true
}

// AppendStoredEvent appends one RouterEvent JSON object for a dumped stored chain, and, for a
// bridged chain, a comma and the removed event of its placeholders (same event id).
func AppendStoredEvent(dst []byte, eventID uint64, ev radix.DumpEvent) []byte {
	dst = appendStored(dst, eventID, ev)
	if ev.Bridge <= 0 || ev.Bridge > len(ev.Blocks) {
		return dst
	}
	dst = append(dst, `,{"worker_id":`...)
	dst = strconv.AppendUint(dst, ev.Owner.Worker, 10)
	dst = append(dst, `,"storage_tier":"`...)
	dst = append(dst, ev.Tier.String()...)
	dst = append(dst, `","event":{"event_id":`...)
	dst = strconv.AppendUint(dst, eventID, 10)
	dst = append(dst, `,"data":{"removed":{"block_hashes":[`...)
	for i, b := range ev.Blocks[:ev.Bridge] {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, b.External, 10)
	}
	dst = append(dst, `]}},"dp_rank":`...)
	dst = strconv.AppendUint(dst, uint64(ev.Owner.Rank), 10)
	return append(dst, "}}"...)
}

// appendStored appends the stored RouterEvent of a dumped chain.
func appendStored(dst []byte, eventID uint64, ev radix.DumpEvent) []byte {
	dst = append(dst, `{"worker_id":`...)
	dst = strconv.AppendUint(dst, ev.Owner.Worker, 10)
	dst = append(dst, `,"storage_tier":"`...)
	dst = append(dst, ev.Tier.String()...)
	dst = append(dst, `","event":{"event_id":`...)
	dst = strconv.AppendUint(dst, eventID, 10)
	dst = append(dst, `,"data":{"stored":{"parent_hash":`...)
	if ev.HasParent {
		dst = strconv.AppendUint(dst, ev.Parent, 10)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"start_position":null,"blocks":[`...)
	for i, b := range ev.Blocks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"block_hash":`...)
		dst = strconv.AppendUint(dst, b.External, 10)
		dst = append(dst, `,"tokens_hash":`...)
		dst = strconv.AppendUint(dst, b.Local, 10)
		dst = append(dst, `,"mm_extra_info":null}`...)
	}
	dst = append(dst, `]}},"dp_rank":`...)
	dst = strconv.AppendUint(dst, uint64(ev.Owner.Rank), 10)
	dst = append(dst, "}}"...)
	return dst
}
