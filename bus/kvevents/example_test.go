package kvevents_test

import (
	"fmt"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/kvwire"
)

// A mock worker encodes a batch; a listener parses the frames and decodes
// the payload into a reusable Batch.
func ExampleDecoder_Decode() {
	out := kvevents.Batch{TS: 1700000000.5, HasDPRank: true, Events: []kvevents.Event{{
		Kind: kvevents.KindBlockStored, BlockHashes: []uint64{11, 12},
		TokenIDs: []uint32{1, 2, 3, 4, 5, 6, 7, 8}, BlockSize: 4, Medium: kvwire.TierHostPinned,
	}, {Kind: kvevents.KindBlockRemoved, BlockHashes: []uint64{10}}}}
	frames := [][]byte{[]byte("kv@pod-a@model"), kvevents.AppendReplayRequest(nil, 41), kvevents.AppendBatch(nil, &out)}

	topic, seq, payload, err := kvevents.ParseLive(frames)
	if err != nil {
		panic(err)
	}
	var dec kvevents.Decoder
	var in kvevents.Batch
	if err := dec.Decode(payload, &in); err != nil {
		panic(err)
	}
	fmt.Printf("%s seq=%d rank=%d\n", topic, seq, in.DPRank)
	for _, e := range in.Events {
		fmt.Println(e.Kind, e.BlockHashes, e.TokenIDs, kvevents.MediumString(e.Medium), e.Indexable())
	}
	// Output:
	// kv@pod-a@model seq=41 rank=0
	// BlockStored [11 12] [1 2 3 4 5 6 7 8] CPU_PINNED true
	// BlockRemoved [10] [] GPU true
}
