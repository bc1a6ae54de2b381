package kvevents

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvselect/kvselect/kvwire"
)

// randBatch builds a random Batch in the normal form Decode produces, so
// that Decode(AppendBatch(b)) must equal b exactly.
func randBatch(r *rand.Rand) Batch {
	b := Batch{TS: r.Float64() * 2e9}
	switch r.IntN(8) {
	case 0:
		b.TS = math.NaN()
	case 1:
		b.TS = math.Inf(-1)
	}
	if r.IntN(3) > 0 {
		b.HasDPRank, b.DPRank = true, int32(r.IntN(1<<31))
	}
	for i, n := 0, r.IntN(6); i < n; i++ {
		b.Events = append(b.Events, randEvent(r))
	}
	return b
}

var (
	loras = []string{"", "adapter-a", "a-much-longer-adapter-name-exceeding-31-bytes"}
	kinds = []string{"", "full_attention", "sliding_window", "mamba", "something-new"}
)

func randEvent(r *rand.Rand) Event {
	e := Event{Kind: Kind(1 + r.IntN(3))}
	if e.Kind == KindAllBlocksCleared {
		return e
	}
	for i, n := 0, r.IntN(5); i < n; i++ {
		e.BlockHashes = append(e.BlockHashes, randHash(r))
	}
	e.Medium = kvwire.Tier(r.IntN(4))
	if r.IntN(2) == 0 {
		e.HasGroupIdx, e.GroupIdx = true, int64(r.IntN(5))-1
	}
	e.SpecKind = kinds[r.IntN(len(kinds))]
	if r.IntN(3) == 0 {
		e.HasSlidingWindow, e.SlidingWindow = true, int64(r.Uint64()>>1)
	}
	if r.IntN(3) == 0 {
		e.CacheSalt = loras[r.IntN(len(loras))]
	}
	e.Locality = Locality(r.IntN(3))
	if e.Kind == KindBlockRemoved {
		return e
	}
	if r.IntN(2) == 0 {
		e.HasParent, e.Parent = true, randHash(r)
	}
	bs := 1 + r.IntN(16)
	e.BlockSize = bs
	n := len(e.BlockHashes) * bs
	if r.IntN(4) == 0 && n >= 1 {
		e.Eagle = true
		n++
	}
	for i := 0; i < n; i++ {
		e.TokenIDs = append(e.TokenIDs, randToken(r))
	}
	e.LoraName = loras[r.IntN(len(loras))]
	if r.IntN(3) == 0 {
		blocks := 1 + r.IntN(4)
		e.MMHashes = make([][]uint64, blocks)
		e.MMHashes[r.IntN(blocks)] = []uint64{r.Uint64(), r.Uint64() & 0xff}
	}
	return e
}

// randHash favours small values so every integer width is exercised.
func randHash(r *rand.Rand) uint64 {
	return r.Uint64() >> (r.IntN(8) * 8)
}

func randToken(r *rand.Rand) uint32 {
	return r.Uint32() >> (r.IntN(4) * 8)
}

// TestRoundTripProperty: Decode(AppendBatch(b)) == b for random batches,
// and decoding into a reused Batch never leaks state between batches.
func TestRoundTripProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	var d Decoder
	var got Batch
	var buf []byte
	for i := 0; i < 5000; i++ {
		want := randBatch(r)
		buf = AppendBatch(buf[:0], &want)
		if err := d.Decode(buf, &got); err != nil {
			t.Fatalf("iter %d: %v\n%+v", i, err, want)
		}
		if diff := diffBatch(&got, &want, true); diff != "" {
			t.Fatalf("iter %d: %s\nwant %+v", i, diff, want)
		}
	}
}

// appendMapEvent is a test-only encoder for vLLM's map form (PR #42892),
// writing keys in a random order so that the "type not first" path is
// exercised as well as msgspec's type-first order.
func appendMapEvent(dst []byte, e *Event, r *rand.Rand) []byte {
	type kv struct {
		k string
		v func([]byte) []byte
	}
	fields := []kv{{"type", func(b []byte) []byte { return appendString(b, e.Kind.String()) }}}
	if e.Kind != KindAllBlocksCleared {
		fields = append(fields,
			kv{"block_hashes", func(b []byte) []byte { return appendHashes(b, e.BlockHashes) }},
			kv{"medium", func(b []byte) []byte { return appendString(b, MediumString(e.Medium)) }},
			kv{"group_idx", func(b []byte) []byte { return appendOptInt(b, e.GroupIdx, e.HasGroupIdx) }},
			kv{"kv_cache_spec_kind", func(b []byte) []byte { return appendOptString(b, e.SpecKind) }},
			kv{"kv_cache_spec_sliding_window", func(b []byte) []byte {
				return appendOptInt(b, e.SlidingWindow, e.HasSlidingWindow)
			}},
			kv{"cache_salt", func(b []byte) []byte { return appendOptString(b, e.CacheSalt) }},
			kv{"locality", func(b []byte) []byte { return appendOptString(b, e.Locality.String()) }},
			kv{"future_field", func(b []byte) []byte { return appendHashes(b, []uint64{1, 2}) }},
		)
	}
	if e.Kind == KindBlockStored {
		fields = append(fields,
			kv{"parent_block_hash", func(b []byte) []byte {
				if !e.HasParent {
					return appendNil(b)
				}
				return appendUint(b, e.Parent)
			}},
			kv{"token_ids", func(b []byte) []byte { return appendTokens(b, e) }},
			kv{"block_size", func(b []byte) []byte { return appendInt(b, int64(e.BlockSize)) }},
			kv{"lora_id", func(b []byte) []byte { return appendNil(b) }},
			kv{"lora_name", func(b []byte) []byte { return appendOptString(b, e.LoraName) }},
			kv{"extra_keys", func(b []byte) []byte { return appendExtraKeys(b, e.MMHashes) }},
		)
	}
	if r.IntN(2) == 0 {
		r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	}
	dst = appendMapLen(dst, len(fields))
	for _, f := range fields {
		dst = f.v(appendString(dst, f.k))
	}
	return dst
}

// TestMapFormProperty: random events in map form (any key order, unknown
// keys present) decode to the same events as their positional encoding.
func TestMapFormProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 17))
	var d Decoder
	var got Batch
	for i := 0; i < 3000; i++ {
		want := randBatch(r)
		var buf []byte
		if r.IntN(2) == 0 {
			buf = appendMapLen(buf, 3)
			buf = appendFloat64(appendString(buf, "ts"), want.TS)
			buf = appendString(buf, "events")
		} else {
			buf = appendArrayLen(buf, 3)
			buf = appendFloat64(buf, want.TS)
		}
		buf = appendArrayLen(buf, len(want.Events))
		for j := range want.Events {
			buf = appendMapEvent(buf, &want.Events[j], r)
		}
		if buf[0] != 0x93 {
			buf = appendString(buf, "data_parallel_rank")
		}
		buf = appendOptInt(buf, int64(want.DPRank), want.HasDPRank)
		if err := d.Decode(buf, &got); err != nil {
			t.Fatalf("iter %d: %v", i, err)
		}
		if diff := diffBatch(&got, &want, true); diff != "" {
			t.Fatalf("iter %d: %s", i, diff)
		}
	}
}

// TestStringsDoNotAliasPayload: overwriting the payload after Decode must
// not change any decoded string.
func TestStringsDoNotAliasPayload(t *testing.T) {
	want := Batch{Events: []Event{{Kind: KindBlockStored, LoraName: "adapter-zz", CacheSalt: "salt-zz", SpecKind: "brand_new_kind"}}}
	payload := AppendBatch(nil, &want)
	var d Decoder
	var got Batch
	if err := d.Decode(payload, &got); err != nil {
		t.Fatal(err)
	}
	for i := range payload {
		payload[i] = 'X'
	}
	if diff := diffBatch(&got, &want, true); diff != "" {
		t.Fatalf("decoded strings changed with the payload: %s", diff)
	}
}
