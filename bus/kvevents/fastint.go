package kvevents

import (
	"encoding/binary"
	"math"
)

// Fast paths for the two hot lists of a batch: token ids and block hashes
// make up nearly all of a payload's bytes, and going through the msgpack
// Decoder costs several interface calls per integer. For those lists the
// decoder reads the integers straight from the payload at the reader's
// position and then seeks the reader past them. Anything the fast path does
// not recognise (nil, floats, byte-string hashes, truncation) is handed back
// to the Decoder-based slow path at the same offset, which produces the
// same result or the proper error. The fast and slow paths are
// cross-checked by the golden, property and fuzz tests.

// scanUint decodes a non-negative msgpack integer at p[off:]. size is 0 if
// the code is not an unsigned-integer code or the value is truncated.
func scanUint(p []byte, off int) (v uint64, size int) {
	if off >= len(p) {
		return 0, 0
	}
	c := p[off]
	switch {
	case c <= 0x7f:
		return uint64(c), 1
	case c == 0xcc && off+2 <= len(p):
		return uint64(p[off+1]), 2
	case c == 0xcd && off+3 <= len(p):
		return uint64(binary.BigEndian.Uint16(p[off+1:])), 3
	case c == 0xce && off+5 <= len(p):
		return uint64(binary.BigEndian.Uint32(p[off+1:])), 5
	case c == 0xcf && off+9 <= len(p):
		return binary.BigEndian.Uint64(p[off+1:]), 9
	}
	return 0, 0
}

// scanHashInt decodes a msgpack integer of any width and sign at p[off:]
// as u64 bits (two's complement for negatives). size is 0 otherwise.
func scanHashInt(p []byte, off int) (v uint64, size int) {
	if v, n := scanUint(p, off); n > 0 {
		return v, n
	}
	if off >= len(p) {
		return 0, 0
	}
	c := p[off]
	switch {
	case c >= 0xe0: // negative fixint
		return uint64(int64(int8(c))), 1
	case c == 0xd0 && off+2 <= len(p):
		return uint64(int64(int8(p[off+1]))), 2
	case c == 0xd1 && off+3 <= len(p):
		return uint64(int64(int16(binary.BigEndian.Uint16(p[off+1:])))), 3
	case c == 0xd2 && off+5 <= len(p):
		return uint64(int64(int32(binary.BigEndian.Uint32(p[off+1:])))), 5
	case c == 0xd3 && off+9 <= len(p):
		return binary.BigEndian.Uint64(p[off+1:]), 9
	}
	return 0, 0
}

// appendTokens appends n token ids read from the current position.
// Invariant on return: the reader is positioned just after the last element
// consumed (on error, at or inside the offending element).
func (r *reader) appendTokens(dst []uint32, n int) ([]uint32, error) {
	p := r.payload
	off := r.pos()
	for i := 0; i < n; i++ {
		if v, sz := scanUint(p, off); sz > 0 && v <= math.MaxUint32 {
			dst = append(dst, uint32(v))
			off += sz
			continue
		}
		r.seek(off)
		t, err := r.readToken()
		if err != nil {
			return dst, err
		}
		dst = append(dst, t)
		off = r.pos()
	}
	r.seek(off)
	return dst, nil
}

// appendHashes appends n block hashes read from the current position; the
// positioning invariant is that of appendTokens. Byte-string hashes always
// take the slow path (readHash), which folds them per Event.BlockHashes.
func (r *reader) appendHashes(dst []uint64, n int) ([]uint64, error) {
	p := r.payload
	off := r.pos()
	for i := 0; i < n; i++ {
		if v, sz := scanHashInt(p, off); sz > 0 {
			dst = append(dst, v)
			off += sz
			continue
		}
		r.seek(off)
		h, err := r.readHash()
		if err != nil {
			return dst, err
		}
		dst = append(dst, h)
		off = r.pos()
	}
	r.seek(off)
	return dst, nil
}
