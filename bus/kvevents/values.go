package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// MaxDepth bounds the nesting of values the decoder is willing to walk
// (including values it merely skips). Real batches nest at most 6 deep.
const MaxDepth = 32

// Payload-level sentinel errors. Every decode failure wraps ErrMalformed.
var (
	// ErrMalformed: the payload is not a KVEventBatch this package accepts.
	ErrMalformed = errors.New("kvevents: malformed batch")
	// ErrTooDeep: the payload nests deeper than MaxDepth.
	ErrTooDeep = errors.New("kvevents: nesting deeper than MaxDepth")
	// ErrTooLong: a length prefix claims more elements than bytes remain.
	ErrTooLong = errors.New("kvevents: length prefix exceeds payload")
)

// reader wraps the msgpack low-level decoder over one payload. It adds the
// checks the library leaves to callers: length prefixes are bounded by the
// bytes left (so a hostile header cannot trigger a huge allocation), nil is
// told apart from 0, and skipping is depth-limited.
//
// The msgpack decoder reads straight from rd (a bytes.Reader satisfies its
// io.ByteScanner fast path), so rd's position is the decoder's position and
// seeking rd is safe.
type reader struct {
	payload []byte
	rd      bytes.Reader
	dec     *msgpack.Decoder
	scratch []byte // string/bin bytes; valid until the next readBytes
}

// reset points r at payload.
func (r *reader) reset(payload []byte) {
	r.payload = payload
	r.rd.Reset(payload)
	if r.dec == nil {
		r.dec = msgpack.NewDecoder(&r.rd)
	}
}

// pos is the offset of the next unread byte.
func (r *reader) pos() int { return len(r.payload) - r.rd.Len() }

// seek moves back to an offset previously returned by pos.
func (r *reader) seek(off int) {
	_, _ = r.rd.Seek(int64(off), io.SeekStart)
}

// peek returns the next code without consuming it.
func (r *reader) peek() (byte, error) {
	c, err := r.dec.PeekCode()
	if err != nil {
		return 0, eofErr(err)
	}
	return c, nil
}

// eofErr turns a clean EOF into ErrUnexpectedEOF: every read the decoder
// makes expects more input.
func eofErr(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}

func isStr(c byte) bool {
	return msgpcode.IsFixedString(c) || c == msgpcode.Str8 || c == msgpcode.Str16 || c == msgpcode.Str32
}

func isBin(c byte) bool {
	return c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32
}

// Code classifiers. They look at a peeked code only; lengths and values are
// read by the functions below, which re-check everything they consume.

// isInt reports any msgpack integer code, signed or unsigned, any width.
func isInt(c byte) bool {
	if msgpcode.IsFixedNum(c) {
		return true
	}
	switch c {
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return true
	}
	return false
}

// arrayLen reads an array header; nil yields -1. Any other code is an
// error.
func (r *reader) arrayLen() (int, error) {
	n, err := r.dec.DecodeArrayLen()
	if err != nil {
		return 0, eofErr(err)
	}
	if n > r.rd.Len() {
		return 0, fmt.Errorf("%w: array of %d", ErrTooLong, n)
	}
	return n, nil
}

// mapLen reads a map header (the code must already be known to be a map or
// nil); nil yields -1.
func (r *reader) mapLen() (int, error) {
	n, err := r.dec.DecodeMapLen()
	if err != nil {
		return 0, eofErr(err)
	}
	if n > r.rd.Len()/2 {
		return 0, fmt.Errorf("%w: map of %d", ErrTooLong, n)
	}
	return n, nil
}

// readBytes reads a str or bin value into scratch; nil yields (nil, false).
// The result is only valid until the next readBytes.
func (r *reader) readBytes() ([]byte, bool, error) {
	n, err := r.dec.DecodeBytesLen()
	if err != nil {
		return nil, false, eofErr(err)
	}
	if n < 0 {
		return nil, false, nil
	}
	if n > r.rd.Len() {
		return nil, false, fmt.Errorf("%w: string of %d", ErrTooLong, n)
	}
	if cap(r.scratch) < n {
		r.scratch = make([]byte, n, max(n, 64))
	}
	b := r.scratch[:n]
	if err := r.dec.ReadFull(b); err != nil {
		return nil, false, eofErr(err)
	}
	return b, true, nil
}

// readString reads a str value (nil allowed); bin is accepted too. The
// result may alias the payload (fixstr/str8 fast path) or the scratch
// buffer: callers compare it or copy it, never keep or modify it.
func (r *reader) readString() ([]byte, bool, error) {
	// Fast path for the short strings that make up map keys, tags and
	// media: slice them out of the payload without a copy.
	if off := r.pos(); off < len(r.payload) {
		c := r.payload[off]
		start, n := -1, 0
		switch {
		case msgpcode.IsFixedString(c):
			start, n = off+1, int(c&msgpcode.FixedStrMask)
		case c == msgpcode.Str8 && off+1 < len(r.payload):
			start, n = off+2, int(r.payload[off+1])
		}
		if start >= 0 && start+n <= len(r.payload) {
			r.seek(start + n)
			return r.payload[start : start+n], true, nil
		}
	}
	c, err := r.peek()
	if err != nil {
		return nil, false, err
	}
	if c != msgpcode.Nil && !isStr(c) && !isBin(c) {
		return nil, false, fmt.Errorf("code %#x where a string was expected", c)
	}
	return r.readBytes()
}

// readHash reads one block hash: an integer of any width and sign
// (reinterpreted as u64 bits) or a byte string (big-endian value of its last
// 8 bytes, see Event.BlockHashes).
func (r *reader) readHash() (uint64, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	switch {
	case isInt(c):
		v, err := r.dec.DecodeUint64()
		return v, eofErr(err)
	case isBin(c):
		b, _, err := r.readBytes()
		if err != nil {
			return 0, err
		}
		return foldHashBytes(b), nil
	}
	return 0, fmt.Errorf("code %#x where a block hash was expected", c)
}

// foldHashBytes computes int.from_bytes(b, "big") mod 2^64.
func foldHashBytes(b []byte) uint64 {
	if len(b) >= 8 {
		return binary.BigEndian.Uint64(b[len(b)-8:])
	}
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

// readToken reads one token id, which must be an integer in [0, 2^32).
func (r *reader) readToken() (uint32, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	if !isInt(c) {
		return 0, fmt.Errorf("code %#x where a token id was expected", c)
	}
	v, err := r.dec.DecodeUint64()
	if err != nil {
		return 0, eofErr(err)
	}
	// Negative values decode to two's-complement bits >= 2^63.
	if v > math.MaxUint32 {
		return 0, fmt.Errorf("token id %d out of u32 range", int64(v))
	}
	return uint32(v), nil
}

// readOptInt reads an integer that must fit int64, or nil (present false).
func (r *reader) readOptInt() (v int64, present bool, err error) {
	c, err := r.peek()
	if err != nil {
		return 0, false, err
	}
	switch {
	case c == msgpcode.Nil:
		return 0, false, eofErr(r.dec.DecodeNil())
	case c == msgpcode.Uint64:
		u, err := r.dec.DecodeUint64()
		if err != nil {
			return 0, false, eofErr(err)
		}
		if u > math.MaxInt64 {
			return 0, false, fmt.Errorf("integer %d out of int64 range", u)
		}
		return int64(u), true, nil
	case isInt(c):
		v, err := r.dec.DecodeInt64()
		return v, err == nil, eofErr(err)
	}
	return 0, false, fmt.Errorf("code %#x where an integer was expected", c)
}

// readFloat reads a float64/float32 or (defensively) an integer as float64.
func (r *reader) readFloat() (float64, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	if c != msgpcode.Double && c != msgpcode.Float && !isInt(c) {
		return 0, fmt.Errorf("code %#x where a timestamp was expected", c)
	}
	f, err := r.dec.DecodeFloat64()
	return f, eofErr(err)
}

// skip consumes one value of any type, walking containers itself so that
// nesting is bounded by MaxDepth (the library's Skip recurses without
// limit). depth is the nesting level of the value being skipped.
func (r *reader) skip(depth int) error {
	if depth > MaxDepth {
		return ErrTooDeep
	}
	c, err := r.peek()
	if err != nil {
		return err
	}
	switch {
	case isArray(c):
		n, err := r.arrayLen()
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case isMap(c):
		n, err := r.mapLen()
		if err != nil {
			return err
		}
		for i := 0; i < 2*n; i++ {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case isStr(c) || isBin(c):
		n, err := r.dec.DecodeBytesLen()
		if err != nil {
			return eofErr(err)
		}
		if n > r.rd.Len() {
			return fmt.Errorf("%w: string of %d", ErrTooLong, n)
		}
		_, _ = r.rd.Seek(int64(n), io.SeekCurrent)
		return nil
	}
	// Scalars and extensions: the library skips them without recursion.
	return eofErr(r.dec.Skip())
}

// skipN skips n values at the given depth.
func (r *reader) skipN(n, depth int) error {
	for i := 0; i < n; i++ {
		if err := r.skip(depth); err != nil {
			return err
		}
	}
	return nil
}

// parseHexDigest reports whether s is a 64-hex-digit identifier (vLLM's
// multimodal hash) and returns the value of its first 16 digits. It mirrors
// kvhash.ParseHexDigest; this package must not import core/.
func parseHexDigest(s []byte) (uint64, bool) {
	if len(s) != 64 {
		return 0, false
	}
	var v uint64
	for i, c := range s {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		if i < 16 {
			v = v<<4 | uint64(d)
		}
	}
	return v, true
}
