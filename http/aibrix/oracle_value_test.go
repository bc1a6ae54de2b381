package aibrix

import (
	"math"
	"strconv"
)

// sjValue is a handle to one sjNode of a [sjDoc]. The zero sjValue is invalid
// ([sjValue.Valid] reports false) and every accessor on it returns a zero result,
// so lookups can be chained without checks.
type sjValue struct {
	d *sjDoc
	i int32
}

// Valid reports whether v refers to a sjNode.
func (v sjValue) Valid() bool { return v.d != nil && v.i >= 0 && int(v.i) < len(v.d.nodes) }

func (v sjValue) n() *sjNode {
	if !v.Valid() {
		return nil
	}
	return &v.d.nodes[v.i]
}

// sjKind returns the JSON kind; sjNull for an invalid sjValue.
func (v sjValue) Kind() sjKind {
	if n := v.n(); n != nil {
		return n.kind
	}
	return sjNull
}

// Str returns the unescaped string of a sjString sjNode ("" otherwise).
func (v sjValue) Str() string {
	if n := v.n(); n != nil && n.kind == sjString {
		return v.d.text(n.str)
	}
	return ""
}

// sjBool returns the value of a sjBool sjNode.
func (v sjValue) Bool() bool {
	n := v.n()
	return n != nil && n.kind == sjBool && n.b
}

// Literal returns the literal text of a sjNumber sjNode ("" otherwise).
func (v sjValue) Literal() string {
	if n := v.n(); n != nil && n.kind == sjNumber {
		return v.d.text(n.str)
	}
	return ""
}

// Int parses a sjNumber written as an integer literal (no fraction, no
// exponent) that fits int64. It is the strict reading Go's encoding/json
// applies to integer fields.
func (v sjValue) Int() (int64, bool) {
	n := v.n()
	if n == nil || n.kind != sjNumber {
		return 0, false
	}
	x, err := strconv.ParseInt(v.d.text(n.str), 10, 64)
	return x, err == nil
}

// Float parses any sjNumber as float64; ok is false for non-numbers and for
// magnitudes that overflow to ±Inf.
func (v sjValue) Float() (float64, bool) {
	n := v.n()
	if n == nil || n.kind != sjNumber {
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
// Integral parses a sjNumber whose value is a whole number (JSON Schema's
// "integer": 8000, 8000.0 and 8e3 all qualify) within ±2^53.
func (v sjValue) Integral() (int64, bool) {
	if x, ok := v.Int(); ok {
		return x, true
	}
	f, ok := v.Float()
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// Len returns the number of elements (sjArray) or members (sjObject).
func (v sjValue) Len() int {
	if n := v.n(); n != nil && (n.kind == sjArray || n.kind == sjObject) {
		return int(n.n)
	}
	return 0
}

// First returns the first element or member, or an invalid sjValue.
func (v sjValue) First() sjValue {
	n := v.n()
	if n == nil || (n.kind != sjArray && n.kind != sjObject) || n.first < 0 {
		return sjValue{}
	}
	return sjValue{d: v.d, i: n.first}
}

// Next returns the following sibling, or an invalid sjValue after the last.
func (v sjValue) Next() sjValue {
	n := v.n()
	if n == nil || n.next < 0 {
		return sjValue{}
	}
	return sjValue{d: v.d, i: n.next}
}

// Key returns the member name when v is an object member ("" otherwise).
func (v sjValue) Key() string {
	if n := v.n(); n != nil {
		return v.d.text(n.key)
	}
	return ""
}

// Get returns the member named key of an sjObject (names compare exactly,
// after unescaping). It scans the members, which is cheaper than hashing
// for the small objects of the protocol; objects are duplicate-free, so at
// most one member matches.
func (v sjValue) Get(key string) (sjValue, bool) {
	if v.Kind() != sjObject {
		return sjValue{}, false
	}
	for m := v.First(); m.Valid(); m = m.Next() {
		if m.Key() == key {
			return m, true
		}
	}
	return sjValue{}, false
}
