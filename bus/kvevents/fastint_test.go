package kvevents

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// encodeAllWidths returns v encoded with every msgpack integer code that can
// hold it (not only the shortest), as a producer other than msgspec might.
func encodeAllWidths(v int64) [][]byte {
	var out [][]byte
	add := func(b ...byte) { out = append(out, b) }
	if v >= 0 && v <= 0x7f {
		add(byte(v))
	}
	if v >= -32 && v < 0 {
		add(byte(int8(v)))
	}
	if v >= 0 && v <= 0xff {
		add(0xcc, byte(v))
	}
	if v >= 0 && v <= 0xffff {
		add(binary.BigEndian.AppendUint16([]byte{0xcd}, uint16(v))...)
	}
	if v >= 0 && v <= 0xffffffff {
		add(binary.BigEndian.AppendUint32([]byte{0xce}, uint32(v))...)
	}
	if v >= 0 {
		add(binary.BigEndian.AppendUint64([]byte{0xcf}, uint64(v))...)
	}
	if v >= -128 && v <= 127 {
		add(0xd0, byte(int8(v)))
	}
	if v >= -32768 && v <= 32767 {
		add(binary.BigEndian.AppendUint16([]byte{0xd1}, uint16(int16(v)))...)
	}
	if v >= -1<<31 && v <= 1<<31-1 {
		add(binary.BigEndian.AppendUint32([]byte{0xd2}, uint32(int32(v)))...)
	}
	add(binary.BigEndian.AppendUint64([]byte{0xd3}, uint64(v))...)
	return out
}

// TestFastIntMatchesLibrary: the payload fast paths agree with the msgpack
// library's DecodeUint64 on every width and sign, and report the encoded
// size exactly; truncated encodings are refused (size 0).
func TestFastIntMatchesLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	values := []int64{0, 1, 31, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<63 - 1,
		-1, -32, -33, -128, -129, -32768, -32769, -1 << 31, -1<<31 - 1, -1 << 63}
	for i := 0; i < 500; i++ {
		values = append(values, int64(r.Uint64())>>(r.IntN(64)))
	}
	for _, v := range values {
		for _, enc := range encodeAllWidths(v) {
			want, err := msgpack.NewDecoder(bytes.NewReader(enc)).DecodeUint64()
			if err != nil {
				t.Fatalf("library rejects %x: %v", enc, err)
			}
			got, n := scanHashInt(enc, 0)
			if n != len(enc) || got != want {
				t.Fatalf("scanHashInt(%x) = (%d, %d), want (%d, %d)", enc, got, n, want, len(enc))
			}
			if u, n := scanUint(enc, 0); n != 0 && (enc[0] >= 0xd0 && enc[0] <= 0xd3 || enc[0] >= 0xe0 || u != want) {
				t.Fatalf("scanUint(%x) accepted a signed code or misread: %d", enc, u)
			}
			if _, n := scanHashInt(enc[:len(enc)-1], 0); len(enc) > 1 && n != 0 {
				t.Fatalf("scanHashInt accepted truncated %x", enc[:len(enc)-1])
			}
		}
	}
	for _, c := range []byte{0xc0, 0xc2, 0xc3, 0xca, 0xcb, 0xa1, 0x90, 0x80, 0xc4} {
		if _, n := scanHashInt([]byte{c, 0, 0, 0, 0, 0, 0, 0, 0}, 0); n != 0 {
			t.Fatalf("scanHashInt accepted non-integer code %#x", c)
		}
	}
}

// TestTokensAllWidths: token lists mixing every encoding decode through the
// fast path to the same values, and negative tokens fail via the slow path.
func TestTokensAllWidths(t *testing.T) {
	var want []uint32
	var elems [][]byte
	for _, v := range []int64{0, 5, 200, 300, 70000, 1<<32 - 1} {
		for _, enc := range encodeAllWidths(v) {
			want = append(want, uint32(v))
			elems = append(elems, enc)
		}
	}
	p := appendArrayLen(nil, 2)
	p = appendFloat64(p, 1)
	p = appendArrayLen(p, 1)
	p = appendArrayLen(p, 4)
	p = appendString(p, TagBlockStored)
	p = appendHashes(p, []uint64{1})
	p = appendNil(p)
	p = appendArrayLen(p, len(elems))
	for _, e := range elems {
		p = append(p, e...)
	}
	var d Decoder
	var b Batch
	if err := d.Decode(p, &b); err != nil {
		t.Fatal(err)
	}
	if got := b.Events[0].TokenIDs; !slices.Equal(got, want) {
		t.Fatalf("tokens %v, want %v", got, want)
	}
}
