package strictjson

import (
	"math"
	"strconv"
)

// Value is a handle to one node of a [Doc]. The zero Value is invalid
// ([Value.Valid] reports false) and every accessor on it returns a zero result,
// so lookups can be chained without checks.
type Value struct {
	d *Doc
	i int32
}

// Valid reports whether v refers to a node.
func (v Value) Valid() bool { return v.d != nil && v.i >= 0 && int(v.i) < len(v.d.nodes) }

func (v Value) n() *node {
	if !v.Valid() {
		return nil
	}
	return &v.d.nodes[v.i]
}

// Kind returns the JSON kind; Null for an invalid Value.
func (v Value) Kind() Kind {
	if n := v.n(); n != nil {
		return n.kind
	}
	return Null
}

// Str returns the unescaped string of a String node ("" otherwise).
func (v Value) Str() string {
	if n := v.n(); n != nil && n.kind == String {
		return v.d.text(n.str)
	}
	return ""
}

// Bool returns the value of a Bool node.
func (v Value) Bool() bool {
	n := v.n()
	return n != nil && n.kind == Bool && n.b
}

// Literal returns the literal text of a Number node ("" otherwise).
func (v Value) Literal() string {
	if n := v.n(); n != nil && n.kind == Number {
		return v.d.text(n.str)
	}
	return ""
}

// Int parses a Number written as an integer literal (no fraction, no
// exponent) that fits int64. It is the strict reading Go's encoding/json
// applies to integer fields.
func (v Value) Int() (int64, bool) {
	n := v.n()
	if n == nil || n.kind != Number {
		return 0, false
	}
	x, err := strconv.ParseInt(v.d.text(n.str), 10, 64)
	return x, err == nil
}

// Float parses any Number as float64; ok is false for non-numbers and for
// magnitudes that overflow to ±Inf.
func (v Value) Float() (float64, bool) {
	n := v.n()
	if n == nil || n.kind != Number {
		return 0, false
	}
	f, err := strconv.ParseFloat(v.d.text(n.str), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// Integral is the reading the service applies to request ports and
// runningRequests (lenient, as JSON Schema is), while the checker applies
// Int to response ports (strict, as the Gateway's decoder is).
//
// Integral parses a Number whose value is a whole number (JSON Schema's
// "integer": 8000, 8000.0 and 8e3 all qualify) within ±2^53.
func (v Value) Integral() (int64, bool) {
	if x, ok := v.Int(); ok {
		return x, true
	}
	f, ok := v.Float()
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// Len returns the number of elements (Array) or members (Object).
func (v Value) Len() int {
	if n := v.n(); n != nil && (n.kind == Array || n.kind == Object) {
		return int(n.n)
	}
	return 0
}

// First returns the first element or member, or an invalid Value.
func (v Value) First() Value {
	n := v.n()
	if n == nil || (n.kind != Array && n.kind != Object) || n.first < 0 {
		return Value{}
	}
	return Value{d: v.d, i: n.first}
}

// Next returns the following sibling, or an invalid Value after the last.
func (v Value) Next() Value {
	n := v.n()
	if n == nil || n.next < 0 {
		return Value{}
	}
	return Value{d: v.d, i: n.next}
}

// Key returns the member name when v is an object member ("" otherwise).
func (v Value) Key() string {
	if n := v.n(); n != nil {
		return v.d.text(n.key)
	}
	return ""
}

// Get returns the member named key of an Object (names compare exactly,
// after unescaping). It scans the members, which is cheaper than hashing
// for the small objects of the protocol; objects are duplicate-free, so at
// most one member matches.
func (v Value) Get(key string) (Value, bool) {
	if v.Kind() != Object {
		return Value{}, false
	}
	for m := v.First(); m.Valid(); m = m.Next() {
		if m.Key() == key {
			return m, true
		}
	}
	return Value{}, false
}
