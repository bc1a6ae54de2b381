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
func unmarshalU32s(dec *jsontext.Decoder, out *[]uint32) error { return unmarshalInts(dec, out) }

// unmarshalI64s decodes a hash array.
func unmarshalI64s(dec *jsontext.Decoder, out *[]int64) error { return unmarshalInts(dec, out) }

func unmarshalInts[T uint32 | int64](dec *jsontext.Decoder, out *[]T) error {
	if dec.PeekKind() != '[' {
		return json.SkipFunc
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	s, ok := plainInts(raw, make([]T, 0, bytes.Count(raw, []byte{','})+1))
	if !ok {
		return redo(dec, raw, out)
	}
	*out = s
	return nil
}

// plainInts appends the elements of raw, a valid JSON array (ReadValue checked its syntax), to
// s when every one is an integer literal without fraction or exponent that fits T (negative
// only for int64); ok is false otherwise, and s is then garbage.
//
// Validity is what keeps the loop this small: outside strings, a byte <= ' ' is whitespace,
// numbers have no leading zeros, and anything after a number's digits other than whitespace,
// ',' or ']' (a '.', 'e', 'E') starts a fraction or exponent and fails the digit test. Against
// the per-element helper it replaced (benchstat, 8 interleaved runs, 2-core CI machine,
// 2026-12-01): BenchmarkDecodeSelectStrict 13.8 -> 12.7 µs (p=0.20), SelectInProcess
// 20.8 -> 15.7 µs (-24 %, p=0.007). In the CPU profile of DecodeSelectStrict this loop is ~30 %
// and jsontext's ReadValue of the array ~50 % (the af002fd scanner did both in 6.3 µs); an
// eight-digits-at-a-time (SWAR) digit loop measured no faster.
func plainInts[T uint32 | int64](raw []byte, s []T) ([]T, bool) {
	var zero T
	signed := ^zero < 0
	limit, maxDigits := uint64(math.MaxUint32), 10
	if signed {
		limit, maxDigits = math.MaxInt64, 19 // 19 digits never overflow a uint64
	}
	for i := 1; i < len(raw); i++ {
		c := raw[i]
		if c <= ' ' || c == ',' {
			continue
		}
		if c == ']' {
			return s, true
		}
		neg := signed && c == '-'
		if neg {
			i++
		}
		j := i
		var x uint64
		for ; j < len(raw) && raw[j]-'0' <= 9; j++ {
			x = x*10 + uint64(raw[j]-'0')
		}
		if j == i || j-i > maxDigits || x > limit+b2u(neg) {
			return s, false
		}
		if neg {
			x = -x
		}
		s, i = append(s, T(x)), j-1
	}
	return s, false
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
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
