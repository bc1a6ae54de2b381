package kvevents

import (
	"testing"
)

// realisticBatch is one scheduler step of a busy worker: 16 BlockStored
// events of 4 blocks × 16 tokens each (64 stored blocks) plus 4
// BlockRemoved events of 4 hashes (16 removed blocks): 80 block operations.
func realisticBatch() (Batch, int) {
	b := Batch{TS: 1700000000.5, HasDPRank: true}
	h := uint64(0x9e3779b97f4a7c15)
	ops := 0
	for i := 0; i < 16; i++ {
		e := Event{Kind: KindBlockStored, BlockSize: 16, HasParent: i > 0, Parent: h,
			HasGroupIdx: true, SpecKind: "full_attention"}
		for j := 0; j < 4; j++ {
			h = h*6364136223846793005 + 1442695040888963407
			e.BlockHashes = append(e.BlockHashes, h)
			for k := 0; k < 16; k++ {
				e.TokenIDs = append(e.TokenIDs, uint32(h>>uint(k))%151000)
			}
		}
		ops += len(e.BlockHashes)
		b.Events = append(b.Events, e)
	}
	for i := 0; i < 4; i++ {
		e := Event{Kind: KindBlockRemoved}
		for j := 0; j < 4; j++ {
			h = h*6364136223846793005 + 1442695040888963407
			e.BlockHashes = append(e.BlockHashes, h)
		}
		ops += len(e.BlockHashes)
		b.Events = append(b.Events, e)
	}
	return b, ops
}

func benchDecode(b *testing.B, payload []byte, ops int) {
	var d Decoder
	var out Batch
	if err := d.Decode(payload, &out); err != nil { // warm storage
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.Decode(payload, &out); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(ops)*float64(b.N)/b.Elapsed().Seconds(), "blockops/s")
}

// BenchmarkDecodeArray: legacy/SGLang positional events (AppendBatch form).
func BenchmarkDecodeArray(b *testing.B) {
	batch, ops := realisticBatch()
	benchDecode(b, AppendBatch(nil, &batch), ops)
}

// BenchmarkDecodeMap: current vLLM map events (type first, as msgspec).
func BenchmarkDecodeMap(b *testing.B) {
	batch, ops := realisticBatch()
	buf := appendArrayLen(nil, 3)
	buf = appendFloat64(buf, batch.TS)
	buf = appendArrayLen(buf, len(batch.Events))
	for i := range batch.Events {
		buf = appendMsgspecMapEvent(buf, &batch.Events[i])
	}
	buf = appendInt(buf, 0)
	benchDecode(b, buf, ops)
}

// appendMsgspecMapEvent writes a map event the way vLLM >= #42892 does:
// "type" first, required keys even when nil, optional keys when set.
func appendMsgspecMapEvent(dst []byte, e *Event) []byte {
	if e.Kind == KindBlockRemoved {
		dst = appendMapLen(dst, 3)
		dst = appendString(appendString(dst, "type"), TagBlockRemoved)
		dst = appendHashes(appendString(dst, "block_hashes"), e.BlockHashes)
		return appendString(appendString(dst, "medium"), MediumString(e.Medium))
	}
	dst = appendMapLen(dst, 10)
	dst = appendString(appendString(dst, "type"), TagBlockStored)
	dst = appendHashes(appendString(dst, "block_hashes"), e.BlockHashes)
	dst = appendUint(appendString(dst, "parent_block_hash"), e.Parent)
	dst = appendTokens(appendString(dst, "token_ids"), e)
	dst = appendInt(appendString(dst, "block_size"), int64(e.BlockSize))
	dst = appendNil(appendString(dst, "lora_id"))
	dst = appendString(appendString(dst, "medium"), MediumString(e.Medium))
	dst = appendNil(appendString(dst, "lora_name"))
	dst = appendInt(appendString(dst, "group_idx"), e.GroupIdx)
	return appendString(appendString(dst, "kv_cache_spec_kind"), e.SpecKind)
}

func BenchmarkAppendBatch(b *testing.B) {
	batch, ops := realisticBatch()
	buf := AppendBatch(nil, &batch)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	for i := 0; i < b.N; i++ {
		buf = AppendBatch(buf[:0], &batch)
	}
	b.ReportMetric(float64(ops)*float64(b.N)/b.Elapsed().Seconds(), "blockops/s")
}

// TestDecodeSteadyStateAllocs: after the first batch, decoding the same
// shape into the same Batch allocates nothing.
func TestDecodeSteadyStateAllocs(t *testing.T) {
	batch, _ := realisticBatch()
	batch.Events[0].LoraName = "adapter-a" // interned after first sight
	batch.Events[1].CacheSalt = "tenant-a"
	payload := AppendBatch(nil, &batch)
	var d Decoder
	var out Batch
	if err := d.Decode(payload, &out); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if err := d.Decode(payload, &out); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("steady-state Decode allocates %.1f times per batch", allocs)
	}
}
