package api

import (
	"bytes"
	"math"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Unmarshalers of the hot arrays: token ids ([]uint32) and block/sequence hashes ([]int64).
// jsontext reads and validates the whole array in one ReadValue; a tight loop then converts
// plain integer literals. Anything else (a fraction, an exponent, a string, null, a value out
// of range) sends the array to the library's own []uint32/[]int64 decoding, so errors and
// their paths are the library's and the loop never has to produce one.
//
// Why not the library alone: on the 512-token /select body of BenchmarkDecodeSelectStrict,
// json.Unmarshal without these unmarshalers took 1.4-3x as long (138-344 µs against 71-136 µs
// per op, measured side by side on the loaded 2-core CI machine, 2026-12-01) and 12 allocations
// (4.4 KB) against 4 (2.4 KB): its generic slice decoding grows the slice element by element.

// unmarshalU32s decodes a token-id array.
func unmarshalU32s(dec *jsontext.Decoder, out *[]uint32) error {
	if dec.PeekKind() != '[' {
		return json.SkipFunc
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	s := make([]uint32, 0, bytes.Count(raw, []byte{','})+1)
	for i := 1; ; {
		x, next, end, ok := plainInt(raw, i, false)
		if !ok || x > math.MaxUint32 {
			return redo(dec, raw, out)
		}
		if end {
			*out = s
			return nil
		}
		s, i = append(s, uint32(x)), next
	}
}

// unmarshalI64s decodes a hash array.
func unmarshalI64s(dec *jsontext.Decoder, out *[]int64) error {
	if dec.PeekKind() != '[' {
		return json.SkipFunc
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	s := make([]int64, 0, bytes.Count(raw, []byte{','})+1)
	for i := 1; ; {
		x, next, end, ok := plainInt(raw, i, true)
		if !ok {
			return redo(dec, raw, out)
		}
		if end {
			*out = s
			return nil
		}
		s, i = append(s, int64(x)), next
	}
}

// redo decodes raw with the library's default slice decoding, for its verdict and errors.
// The error's pointer and offset are relative to raw; arrayError carries them out.
func redo[T any](dec *jsontext.Decoder, raw jsontext.Value, out *[]T) error {
	if err := json.Unmarshal(raw, out, jsontext.AllowInvalidUTF8(true)); err != nil {
		return &arrayError{err: err, off: dec.InputOffset() - int64(len(raw))}
	}
	return nil
}

// arrayError is an element error of a hot array at body offset off; decodeErr joins its
// relative pointer and offset to the array's own.
type arrayError struct {
	err error
	off int64
}

func (e *arrayError) Error() string { return e.err.Error() }
func (e *arrayError) Unwrap() error { return e.err }

// plainInt reads the element at raw[i:] of a valid JSON array: an integer literal without
// fraction or exponent (negative only when signed), followed by ',' or ']'. It returns the
// value as a uint64 bit pattern (two's complement when negative), the index after the ','
// and whether the array ended ("]" with no element, or after this one). ok is false for any
// other element and for values outside int64 (signed) or uint64.
func plainInt(raw []byte, i int, signed bool) (x uint64, next int, end, ok bool) {
	for raw[i] == ' ' || raw[i] == '\n' || raw[i] == '\t' || raw[i] == '\r' {
		i++
	}
	if raw[i] == ']' {
		return 0, i, true, true // only as the first token: raw is valid JSON
	}
	neg := signed && raw[i] == '-'
	if neg {
		i++
	}
	start := i
	for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
		d := uint64(raw[i] - '0')
		if x > (math.MaxUint64-d)/10 {
			return 0, 0, false, false
		}
		x = x*10 + d
	}
	if i == start || (signed && ((!neg && x > math.MaxInt64) || (neg && x > 1<<63))) {
		return 0, 0, false, false
	}
	if neg {
		x = -x
	}
	for raw[i] == ' ' || raw[i] == '\n' || raw[i] == '\t' || raw[i] == '\r' {
		i++
	}
	switch raw[i] {
	case ',':
		return x, i + 1, false, true
	case ']':
		// The last element: report it, then the end on the next call.
		return x, i, false, true
	}
	return 0, 0, false, false
}

// unmarshalPair decodes one [start, end] offset pair the way encoding/json (the reference)
// fills a Go array: extra elements are skipped, missing ones stay zero.
func unmarshalPair(dec *jsontext.Decoder, out *[2]uint64) error {
	if dec.PeekKind() != '[' {
		return json.SkipFunc
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for i := 0; dec.PeekKind() != ']'; i++ {
		var err error
		if i < len(out) {
			err = json.UnmarshalDecode(dec, &out[i])
		} else {
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}
