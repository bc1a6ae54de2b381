package api

// A schema-aware generator of request bodies for the property test: it knows each request
// type's fields by reflection and produces bodies that are mostly close to valid, because that
// is where the decoder's decisions are made: keys in the wrong case or escaped, duplicate and
// unknown fields, numbers at and past every type's bounds, strings with escapes, surrogates and
// invalid UTF-8, nulls and wrong types anywhere, odd whitespace, and a few corrupted bodies.

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

type bodyGen struct {
	r  *rand.Rand
	sb strings.Builder
}

// numbers are integer and float literals around every bound the request types have.
var genNumbers = []string{
	"0", "1", "7", "-1", "-0", "42", "4294967295", "4294967296", "18446744073709551615",
	"18446744073709551616", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
	"-9223372036854775809", "123456789012345678901234567890", "1.5", "-2.25", "1e3", "1E+2",
	"2e-3", "-0.0", "0.0", "3.4028234e38", "3.5e38", "1e400", "-1e400", "1e-400", "0.5", "1.0",
}

// genStringParts are pieces of string literal bodies (already JSON-escaped where needed).
var genStringParts = []string{
	"a", "b", "worker", " ", "\\n", "\\t", "\\\"", "\\\\", "\\/", "\\u00e9", "\\u0041",
	"\\ud83d\\ude00", "\\ud800", "\\udc00", "\\ud800\\u0041", "é", "日本", "\xff", "\xc3", "<&>",
	"\u2028",
}

// body returns one random body for type t. One body in ten is then damaged (truncated, a byte
// inserted or deleted, or trailing data appended) so that syntax errors, and their precedence
// over data errors, are exercised at random positions, not only at the hand-picked ones.
func (g *bodyGen) body(t reflect.Type) []byte {
	g.sb.Reset()
	g.ws()
	g.value(t, 0)
	g.ws()
	b := []byte(g.sb.String())
	switch g.r.IntN(40) {
	case 0:
		if len(b) > 0 {
			b = b[:g.r.IntN(len(b))]
		}
	case 1:
		i := g.r.IntN(len(b) + 1)
		b = slices.Insert(b, i, "{}[],:\"\\x0-e1 n"[g.r.IntN(15)])
	case 2:
		if len(b) > 0 {
			i := g.r.IntN(len(b))
			b = slices.Delete(b, i, i+1)
		}
	case 3:
		b = append(b, []string{"x", " {}", "}", "]", "1", " null", ","}[g.r.IntN(7)]...)
	}
	return b
}

func (g *bodyGen) ws() {
	if g.r.IntN(6) == 0 {
		g.sb.WriteString([]string{" ", "\n", "\t ", "\r\n"}[g.r.IntN(4)])
	}
}

// value writes a value meant for type t, occasionally null or of the wrong kind. Depth is
// bounded so bodies stay small; below depth 4 every value is of a random kind.
func (g *bodyGen) value(t reflect.Type, depth int) {
	switch n := g.r.IntN(30); {
	case n == 0:
		g.sb.WriteString("null")
		return
	case n == 1 || depth > 4:
		g.any(depth)
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		g.object(t, depth)
	case reflect.Slice, reflect.Array:
		// Mostly short arrays, sometimes long ones, so that the integer fast paths see both a
		// closing ']' early and many commas (and [2]uint64 sees extra elements).
		g.sb.WriteByte('[')
		n := g.r.IntN(5)
		if g.r.IntN(8) == 0 {
			n = 20 + g.r.IntN(40)
		}
		for i := range n {
			if i > 0 {
				g.sb.WriteByte(',')
			}
			g.ws()
			g.value(t.Elem(), depth+1)
		}
		g.sb.WriteByte(']')
	case reflect.Map:
		g.sb.WriteByte('{')
		for i := range g.r.IntN(4) {
			if i > 0 {
				g.sb.WriteByte(',')
			}
			g.str()
			g.sb.WriteByte(':')
			g.value(t.Elem(), depth+1)
		}
		g.sb.WriteByte('}')
	case reflect.String:
		g.str()
	case reflect.Bool:
		g.sb.WriteString([]string{"true", "false"}[g.r.IntN(2)])
	default:
		// Every numeric kind draws from the same list, so each sees literals that are in
		// range, just out of range, negative, fractional and exponent forms.
		g.sb.WriteString(genNumbers[g.r.IntN(len(genNumbers))])
	}
}

// object writes some of struct t's fields, with case-mangled, escaped, duplicated and unknown
// keys mixed in.
func (g *bodyGen) object(t reflect.Type, depth int) {
	fields := jsonFields(t)
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	g.sb.WriteByte('{')
	count := g.r.IntN(min(len(names), 6) + 1)
	for i := range count {
		if i > 0 {
			g.sb.WriteByte(',')
		}
		g.ws()
		name := names[g.r.IntN(len(names))]
		ft := fields[name]
		switch g.r.IntN(12) {
		case 0:
			name = mangleCase(g.r, name)
		case 1:
			name = strings.Replace(name, "_", "\\u005f", 1)
		case 2:
			name = "x_" + name
			ft = nil
		}
		g.sb.WriteString(`"` + name + `":`)
		g.ws()
		if ft == nil {
			g.any(depth + 1)
		} else {
			g.value(ft, depth+1)
		}
		if g.r.IntN(15) == 0 { // the same key again
			g.sb.WriteString(`,"` + name + `":`)
			if ft == nil {
				g.any(depth + 1)
			} else {
				g.value(ft, depth+1)
			}
		}
	}
	g.ws()
	g.sb.WriteByte('}')
}

// mangleCase changes the case of one or all letters of name.
func mangleCase(r *rand.Rand, name string) string {
	if r.IntN(2) == 0 {
		return strings.ToUpper(name)
	}
	b := []rune(name)
	i := r.IntN(len(b))
	b[i] = unicode.ToUpper(b[i])
	return string(b)
}

// any writes a random JSON value of any kind.
func (g *bodyGen) any(depth int) {
	n := 7
	if depth > 4 {
		n = 5
	}
	switch g.r.IntN(n) {
	case 0:
		g.sb.WriteString("null")
	case 1:
		g.sb.WriteString([]string{"true", "false"}[g.r.IntN(2)])
	case 2:
		g.sb.WriteString(genNumbers[g.r.IntN(len(genNumbers))])
	case 3, 4:
		g.str()
	case 5:
		g.sb.WriteByte('[')
		for i := range g.r.IntN(3) {
			if i > 0 {
				g.sb.WriteByte(',')
			}
			g.any(depth + 1)
		}
		g.sb.WriteByte(']')
	case 6:
		g.sb.WriteByte('{')
		for i := range g.r.IntN(3) {
			if i > 0 {
				g.sb.WriteByte(',')
			}
			g.str()
			g.sb.WriteByte(':')
			g.any(depth + 1)
		}
		g.sb.WriteByte('}')
	}
}

// str writes a string literal built from genStringParts.
func (g *bodyGen) str() {
	g.sb.WriteByte('"')
	for range g.r.IntN(4) {
		g.sb.WriteString(genStringParts[g.r.IntN(len(genStringParts))])
	}
	g.sb.WriteByte('"')
}
