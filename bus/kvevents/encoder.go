package kvevents

import (
	"encoding/binary"
	"math"
	"strconv"
)

// AppendBatch appends b encoded the way vLLM's msgspec encoder writes a
// KVEventBatch with array-like (positional) events, and returns the
// extended slice. It is meant for mock workers, simulators and tests.
//
// Layout (every field written, nil included, as msgspec does for
// array_like structs):
//
//	batch        [ts float64, events, data_parallel_rank int|nil]
//	BlockStored  ["BlockStored", block_hashes, parent_block_hash|nil,
//	              token_ids, block_size, lora_id=nil, medium, lora_name|nil,
//	              extra_keys|nil, group_idx|nil, kv_cache_spec_kind|nil,
//	              kv_cache_spec_sliding_window|nil]
//	BlockRemoved ["BlockRemoved", block_hashes, medium, group_idx|nil]
//	AllBlocksCleared ["AllBlocksCleared"]
//
// Integers use msgspec's shortest forms (unsigned codes for non-negative
// values); hashes are written as unsigned integers; token_ids of an Eagle
// event with at least two tokens are written as bigrams; medium is
// MediumString(...); MMHashes become extra_keys entries of 64-hex identifiers
// whose first 16 digits are the hash (so they decode to the same values).
//
// Fields vLLM's positional schema has no slot for are appended as extra
// elements only when set, so output for vLLM-shaped events is unchanged:
// a BlockRemoved with a spec kind or sliding window gets them after
// group_idx, and CacheSalt / Locality travel in a trailing metadata map
// {"cache_salt": s, "locality": l} (the shape SGLang uses for salted
// events). Decode(AppendBatch(b)) reproduces b except for Unknown (always
// 0) and Eagle on events with fewer than two tokens.
func AppendBatch(dst []byte, b *Batch) []byte {
	dst = appendArrayLen(dst, 3)
	dst = appendFloat64(dst, b.TS)
	dst = appendArrayLen(dst, len(b.Events))
	for i := range b.Events {
		dst = appendEvent(dst, &b.Events[i])
	}
	if b.HasDPRank {
		dst = appendInt(dst, int64(b.DPRank))
	} else {
		dst = appendNil(dst)
	}
	return dst
}

// appendEvent appends one event in positional form.
func appendEvent(dst []byte, e *Event) []byte {
	meta := metadataLen(e)
	switch e.Kind {
	case KindBlockStored:
		n := 12
		if meta > 0 {
			n++
		}
		dst = appendArrayLen(dst, n)
		dst = appendString(dst, TagBlockStored)
		dst = appendHashes(dst, e.BlockHashes)
		if e.HasParent {
			dst = appendUint(dst, e.Parent)
		} else {
			dst = appendNil(dst)
		}
		dst = appendTokens(dst, e)
		dst = appendInt(dst, int64(e.BlockSize))
		dst = appendNil(dst) // lora_id (deprecated)
		dst = appendString(dst, MediumString(e.Medium))
		dst = appendOptString(dst, e.LoraName)
		dst = appendExtraKeys(dst, e.MMHashes)
		dst = appendOptInt(dst, e.GroupIdx, e.HasGroupIdx)
		dst = appendOptString(dst, e.SpecKind)
		dst = appendOptInt(dst, e.SlidingWindow, e.HasSlidingWindow)
	case KindBlockRemoved:
		n := 4
		if e.SpecKind != "" || e.HasSlidingWindow {
			n = 6
		}
		if meta > 0 {
			n++
		}
		dst = appendArrayLen(dst, n)
		dst = appendString(dst, TagBlockRemoved)
		dst = appendHashes(dst, e.BlockHashes)
		dst = appendString(dst, MediumString(e.Medium))
		dst = appendOptInt(dst, e.GroupIdx, e.HasGroupIdx)
		if n >= 6 {
			dst = appendOptString(dst, e.SpecKind)
			dst = appendOptInt(dst, e.SlidingWindow, e.HasSlidingWindow)
		}
	default:
		return appendString(appendArrayLen(dst, 1), TagAllBlocksCleared)
	}
	if meta > 0 {
		dst = appendMapLen(dst, meta)
		if e.CacheSalt != "" {
			dst = appendString(appendString(dst, "cache_salt"), e.CacheSalt)
		}
		if e.Locality != LocalityUnset {
			dst = appendString(appendString(dst, "locality"), e.Locality.String())
		}
	}
	return dst
}

// metadataLen counts the entries of e's trailing metadata map.
func metadataLen(e *Event) int {
	n := 0
	if e.CacheSalt != "" {
		n++
	}
	if e.Locality != LocalityUnset {
		n++
	}
	return n
}

func appendHashes(dst []byte, hs []uint64) []byte {
	dst = appendArrayLen(dst, len(hs))
	for _, h := range hs {
		dst = appendUint(dst, h)
	}
	return dst
}

// appendTokens writes flat token ids, or Eagle bigrams (t[i], t[i+1]).
func appendTokens(dst []byte, e *Event) []byte {
	t := e.TokenIDs
	if !e.Eagle || len(t) < 2 {
		dst = appendArrayLen(dst, len(t))
		for _, v := range t {
			dst = appendUint(dst, uint64(v))
		}
		return dst
	}
	dst = appendArrayLen(dst, len(t)-1)
	for i := 0; i+1 < len(t); i++ {
		dst = appendArrayLen(dst, 2)
		dst = appendUint(dst, uint64(t[i]))
		dst = appendUint(dst, uint64(t[i+1]))
	}
	return dst
}

// appendExtraKeys writes per-block tuples of 64-hex multimodal identifiers,
// or nil when there are none.
func appendExtraKeys(dst []byte, mm [][]uint64) []byte {
	if mm == nil {
		return appendNil(dst)
	}
	dst = appendArrayLen(dst, len(mm))
	for _, blk := range mm {
		if len(blk) == 0 {
			dst = appendNil(dst)
			continue
		}
		dst = appendArrayLen(dst, len(blk))
		for _, h := range blk {
			dst = append(dst, 0xd9, 64) // str8, 64 bytes (msgspec's choice for >= 32)
			var hex [16]byte
			s := strconv.AppendUint(hex[:0], h, 16)
			for i := len(s); i < 16; i++ {
				dst = append(dst, '0')
			}
			dst = append(dst, s...)
			for i := 0; i < 48; i++ {
				dst = append(dst, '0')
			}
		}
	}
	return dst
}

// Low-level msgpack writers producing msgspec's encodings (see the
// reference §1.5): integers in their shortest form, with unsigned codes
// (positive fixint, 0xcc..0xcf) for every non-negative value and signed
// codes (negative fixint, 0xd0..0xd3) only for negative ones; floats always
// as float64 (0xcb); strings as fixstr/str8/str16/str32 (never bin); arrays
// and maps with the smallest header. Each appends to dst and returns it.

func appendNil(dst []byte) []byte { return append(dst, 0xc0) }

func appendFloat64(dst []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(f))
}

func appendUint(dst []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(dst, byte(v))
	case v <= math.MaxUint8:
		return append(dst, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), v)
}

func appendInt(dst []byte, v int64) []byte {
	switch {
	case v >= 0:
		return appendUint(dst, uint64(v))
	case v >= -32:
		return append(dst, byte(v))
	case v >= math.MinInt8:
		return append(dst, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(dst, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(v))
}

func appendOptInt(dst []byte, v int64, ok bool) []byte {
	if !ok {
		return appendNil(dst)
	}
	return appendInt(dst, v)
}

func appendString(dst []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		dst = append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		dst = append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
	}
	return append(dst, s...)
}

// appendOptString writes s, or nil when s is empty (absent).
func appendOptString(dst []byte, s string) []byte {
	if s == "" {
		return appendNil(dst)
	}
	return appendString(dst, s)
}

func appendArrayLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdd), uint32(n))
}

func appendMapLen(dst []byte, n int) []byte {
	switch {
	case n < 16:
		return append(dst, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdf), uint32(n))
}
