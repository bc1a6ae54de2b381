package api

import (
	"math"
	"math/bits"
	"strconv"
)

// Typed readers of the strict request decoder: scalars, optional scalars, slices and maps.
//
// Every reader starts at the value (leading whitespace allowed) and leaves d.pos just after it.
// null follows encoding/json: it sets a pointer, slice or map to nil and leaves any other kind
// unchanged (an element or map value that is null is therefore its type's zero value). Every
// failure is a *jsonError; a data error may be reported for a value that is in fact malformed,
// because decodeBody re-checks the syntax of the whole body before reporting any data error.

// uintVal reads a non-negative integer no larger than max; want names the type for errors.
//
// Like encoding/json (which parses the literal with strconv.ParseUint), it accepts only a
// plain integer literal: "1.0", "1e2" and "-0" are data errors, not conversions. Overflow is
// detected exactly with 128-bit multiply-add, so no literal length is special.
func (d *decoder) uintVal(max uint64, want string) (uint64, error) {
	c := d.peek()
	if c < '0' || c > '9' {
		if c == '-' {
			return 0, d.dataErr("invalid value: " + d.describe() + ", expected " + want)
		}
		return 0, d.typeErr(want)
	}
	start := d.pos
	lit, err := d.integer(want)
	if err != nil {
		return 0, err
	}
	var v uint64
	for _, ch := range lit {
		hi, lo := bits.Mul64(v, 10)
		lo, carry := bits.Add64(lo, uint64(ch-'0'), 0)
		if hi|carry != 0 || lo > max {
			d.pos = start
			return 0, d.dataErr("invalid value: integer `" + string(lit) + "`, expected " + want)
		}
		v = lo
	}
	return v, nil
}

// integer scans a number that must be a plain integer literal (no fraction or exponent, else a
// type error naming want, with d.pos left at the number) and returns the literal.
func (d *decoder) integer(want string) ([]byte, error) {
	start := d.pos
	lit, integer, err := d.number()
	if err != nil {
		return nil, err
	}
	if !integer {
		d.pos = start
		return nil, d.typeErr(want)
	}
	return lit, nil
}

// u64 reads a u64.
func (d *decoder) u64() (uint64, error) { return d.uintVal(math.MaxUint64, "u64") }

// u32 reads a u32.
func (d *decoder) u32() (uint32, error) {
	v, err := d.uintVal(math.MaxUint32, "u32")
	return uint32(v), err
}

// i64 reads an i64: a plain integer literal in [-2^63, 2^63-1] ("-0" is 0). The magnitude is
// accumulated as a uint64 against a limit one larger for negatives, so -2^63 fits.
func (d *decoder) i64() (int64, error) {
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') {
		return 0, d.typeErr("i64")
	}
	start := d.pos
	lit, err := d.integer("i64")
	if err != nil {
		return 0, err
	}
	digits, limit := lit, uint64(math.MaxInt64)
	if lit[0] == '-' {
		digits, limit = lit[1:], limit+1
	}
	var v uint64
	for _, ch := range digits {
		hi, lo := bits.Mul64(v, 10)
		lo, carry := bits.Add64(lo, uint64(ch-'0'), 0)
		if hi|carry != 0 || lo > limit {
			d.pos = start
			return 0, d.dataErr("invalid value: integer `" + string(lit) + "`, expected i64")
		}
		v = lo
	}
	if lit[0] == '-' {
		return int64(-v), nil // -(1<<63) wraps to itself, the intended value
	}
	return int64(v), nil
}

// float reads a number as a float of the given bit size (encoding/json's ParseFloat, so a
// literal beyond the type's range is a data error).
func (d *decoder) float(bitSize int, want string) (float64, error) {
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') {
		return 0, d.typeErr(want)
	}
	start := d.pos
	lit, _, err := d.number()
	if err != nil {
		return 0, err
	}
	f, perr := strconv.ParseFloat(string(lit), bitSize)
	if perr != nil {
		d.pos = start
		return 0, d.dataErr("invalid value: floating point `" + string(lit) + "`, expected " + want)
	}
	return f, nil
}

// f64 reads an f64.
func (d *decoder) f64() (float64, error) { return d.float(64, "f64") }

// f32 reads an f32.
func (d *decoder) f32() (float32, error) {
	f, err := d.float(32, "f32")
	return float32(f), err
}

// boolean reads true or false.
func (d *decoder) boolean() (bool, error) {
	switch d.peek() {
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	}
	return false, d.typeErr("a boolean")
}

// text reads a string and copies it out of the body.
func (d *decoder) text() (string, error) {
	if d.peek() != '"' {
		return "", d.typeErr("a string")
	}
	s, err := d.str()
	return string(s), err
}

// reader reads one value of type T. The generic helpers below turn readers into the field
// shapes request structs use: a plain field (scalar), an optional one (opt), a slice and a
// string-keyed map. Readers are method expressions such as (*decoder).u64, so one helper
// instantiation serves every field of its shape.
type reader[T any] func(*decoder) (T, error)

// scalar decodes into a non-pointer field: null leaves it unchanged (encoding/json ignores
// null for non-pointer kinds; serde would reject it, see doc.go).
func scalar[T any](d *decoder, dst *T, read reader[T]) error {
	if isNull, err := d.null(); isNull {
		return err
	}
	v, err := read(d)
	if err == nil {
		*dst = v
	}
	return err
}

// opt decodes into a pointer field: null sets nil, anything else a fresh T. The pointer is
// only stored once the value decoded, so a failed field leaves the destination untouched
// (irrelevant to callers, who discard the request on any error, but it keeps v consistent).
func opt[T any](d *decoder, dst **T, read reader[T]) error {
	if isNull, err := d.null(); isNull {
		if err == nil {
			*dst = nil
		}
		return err
	}
	v, err := read(d)
	if err != nil {
		return err
	}
	*dst = &v
	return nil
}

// beginArray opens an array for a slice field. It reports done when the value was null (dst
// is then nil) or the empty array (dst is then empty, not nil, as encoding/json makes it).
func beginArray[T any](d *decoder, dst *[]T) (done bool, err error) {
	if isNull, err := d.null(); isNull {
		if err == nil {
			*dst = nil
		}
		return true, err
	}
	if d.peek() != '[' {
		return true, d.typeErr("a sequence")
	}
	if err := d.open(); err != nil {
		return true, err
	}
	if d.peek() == ']' {
		d.pos++
		d.depth--
		*dst = make([]T, 0)
		return true, nil
	}
	return false, nil
}

// slice decodes an array of T; a null element is T's zero value. The capacity hint is capped at
// 64 here because elements of these slices may be objects, for which the comma count of
// countHint overestimates; the flat integer arrays have their own exact paths (jsonints.go).
func slice[T any](d *decoder, dst *[]T, read reader[T]) error {
	if done, err := beginArray(d, dst); done {
		return err
	}
	out := make([]T, 0, min(d.countHint(), 64))
	for i := 0; ; i++ {
		more, err := d.nextElem(i)
		if err != nil {
			return err
		}
		if !more {
			*dst = out
			return nil
		}
		var v T
		if err := scalar(d, &v, read); err != nil {
			return elemPath(err, i)
		}
		out = append(out, v)
	}
}

// mapOf decodes an object into a map[string]T; a null value is T's zero value and a repeated
// key keeps its last value (encoding/json's and serde's HashMap behaviour alike: the duplicate
// rule applies to struct fields, not to map keys). The map is always fresh: nothing merges
// into a map from an earlier field, since a field cannot be given twice.
func mapOf[T any](d *decoder, dst *map[string]T, read reader[T]) error {
	if isNull, err := d.null(); isNull {
		if err == nil {
			*dst = nil
		}
		return err
	}
	if d.peek() != '{' {
		return d.typeErr("a map")
	}
	if err := d.open(); err != nil {
		return err
	}
	m := make(map[string]T)
	for i := 0; ; i++ {
		key, more, err := d.nextMember(i)
		if err != nil {
			return err
		}
		if !more {
			*dst = m
			return nil
		}
		// The key is copied before the value is read: it may be a view into the scratch
		// buffer, which a string value would overwrite.
		k := string(key)
		var v T
		if err := scalar(d, &v, read); err != nil {
			return withPath(err, k)
		}
		m[k] = v
	}
}

// pairU64 decodes a [2]uint64 the way encoding/json fills a Go array: missing elements stay
// zero and elements past the second are skipped unchecked (syntax only).
func (d *decoder) pairU64() ([2]uint64, error) {
	var out [2]uint64
	if d.peek() != '[' {
		return out, d.typeErr("an array of length 2")
	}
	if err := d.open(); err != nil {
		return out, err
	}
	for i := 0; ; i++ {
		more, err := d.nextElem(i)
		if err != nil || !more {
			return out, err
		}
		if i >= len(out) {
			if err := d.skipValue(); err != nil {
				return out, err
			}
			continue
		}
		if err := scalar(d, &out[i], (*decoder).u64); err != nil {
			return out, elemPath(err, i)
		}
	}
}
