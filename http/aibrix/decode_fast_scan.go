package aibrix

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/kvselect/kvselect/http/aibrix/internal/strictjson"
)

// This file is the lexical half of the single-pass decoder (decode_fast.go
// is the schema half). It reads JSON straight from the body with no
// intermediate tree and has exactly two outcomes per step: success, or
// "give up" (false). Giving up is never a verdict on the body: DecodeRequest
// then runs the reference decoder, which either accepts it or names the
// precise problem. The scanner may therefore give up on anything valid but
// unusual (escaped member names, objects with many members, deep nesting),
// and must never succeed on anything strictjson rejects. Every rule below
// mirrors strictjson exactly or is stricter.
//
// Ownership and concurrency: a fastDecoder is used by one goroutine at a
// time; it is pooled between requests (see decodeFast) and holds no
// reference to a body after release.

// Bounds past which the scanner gives up rather than decide.
const (
	// fastMaxDepth is below strictjson.MaxDepth (64), so the reference
	// parser's depth error can never be skipped over here.
	fastMaxDepth = 48
	// fastMaxMembers bounds the linear duplicate scan per object; it
	// equals MaxAttributes, the largest object a valid request needs.
	fastMaxMembers = MaxAttributes
)

// fastDecoder is the scanner state plus the pooled scratch the schema half
// fills. Invariant between calls to decodeFast: d and s are nil and every
// scratch slice holds no strings (so a pooled decoder pins no body).
type fastDecoder struct {
	d     []byte
	s     string // string(d): every escape-free string is a substring of it
	pos   int
	depth int
	// keys is a stack of the member names of the objects being read, one
	// window per open object, for duplicate detection by linear scan.
	keys []string

	cands []fastCandidate // candidates in wire order
	ports []int           // every candidate's ports, window per candidate
	attrs []Attribute     // every attributes object, window per object
	ids   map[string]int32
}

// ws skips JSON whitespace (the same four bytes strictjson skips).
func (f *fastDecoder) ws() {
	for f.pos < len(f.d) {
		switch f.d[f.pos] {
		case ' ', '\t', '\n', '\r':
			f.pos++
		default:
			return
		}
	}
}

// peek returns the next non-whitespace byte (0 at the end of input).
func (f *fastDecoder) peek() byte {
	f.ws()
	if f.pos < len(f.d) {
		return f.d[f.pos]
	}
	return 0
}

// open consumes c ('{' or '[') and enters one nesting level. The caller
// must have checked that c is next.
func (f *fastDecoder) open() bool {
	f.pos++
	f.depth++
	return f.depth <= fastMaxDepth
}

// member advances inside the object whose names start at keys[base]. first
// is true right after '{'. It returns more=false after consuming '}', or
// the next member's name with its ':' consumed. Duplicate names, escaped
// names and objects of more than fastMaxMembers members give up.
func (f *fastDecoder) member(base int, first bool) (key string, more, ok bool) {
	if more, ok = f.next(first); !more || !ok {
		f.keys = f.keys[:base] // the object ended: its names are done
		return "", more, ok
	}
	key, ok = f.name(base)
	return key, ok, ok
}

// next moves to the next member of an object: it consumes '}' (and leaves
// the object: more=false) or, unless first, a ','; then the next byte must
// open the member's name, which is left unread.
func (f *fastDecoder) next(first bool) (more, ok bool) {
	c := f.peek()
	if c == '}' { // also closes an empty object: '{' '}'
		f.pos++
		f.depth--
		return false, true
	}
	if !first {
		if c != ',' {
			return false, false
		}
		f.pos++
		c = f.peek()
	}
	return true, c == '"'
}

// name reads a member name (f.pos at its quote) and its ':', checking it
// against the other names of the object in keys[base:], then records it.
func (f *fastDecoder) name(base int) (string, bool) {
	if len(f.keys)-base >= fastMaxMembers {
		return "", false
	}
	key, ok := f.plainString()
	if !ok {
		return "", false
	}
	for _, k := range f.keys[base:] {
		if k == key {
			return "", false
		}
	}
	f.keys = append(f.keys, key)
	return key, f.colon()
}

// colon consumes the ':' after a member name.
func (f *fastDecoder) colon() bool {
	if f.peek() != ':' {
		return false
	}
	f.pos++
	return true
}

// knownMember is member for the objects read once per candidate, whose
// interesting names are fixed (known, at most 32). A name spelled exactly
// as known[i] is matched on the raw bytes without a general string scan
// and its repetition is caught by bit i of *seen; idx is then i. Any other
// name takes member's path (idx = -1); it cannot equal a known name,
// because escaped names give up and unescaped ones differ in raw bytes.
func (f *fastDecoder) knownMember(base int, first bool, known []string, seen *uint32) (idx int, more, ok bool) {
	if more, ok = f.next(first); !more || !ok {
		f.keys = f.keys[:base]
		return -1, more, ok
	}
	for i, k := range known {
		end := f.pos + 1 + len(k)
		if end < len(f.d) && f.d[end] == '"' && string(f.d[f.pos+1:end]) == k {
			if *seen&(1<<i) != 0 {
				return -1, false, false
			}
			*seen |= 1 << i
			f.pos = end + 1
			return i, true, f.colon()
		}
	}
	_, ok = f.name(base)
	return -1, ok, ok
}

// elem advances inside an array; first is true right after '['. It returns
// more=false after consuming ']'.
func (f *fastDecoder) elem(first bool) (more, ok bool) {
	c := f.peek()
	if c == ']' {
		f.pos++
		f.depth--
		return false, true
	}
	if first {
		return true, true
	}
	if c != ',' {
		return false, false
	}
	f.pos++
	return true, true
}

// plainString reads a string without escapes at the opening quote and
// returns it as a substring of s. A string with escapes gives up.
func (f *fastDecoder) plainString() (string, bool) {
	start := f.pos + 1
	end, esc, ok := f.scanString()
	if !ok || esc {
		return "", false
	}
	return f.s[start:end], true
}

// str reads any string at the opening quote (the caller checked for '"').
// Escape-free strings are substrings of s; others are unescaped into a new
// string.
func (f *fastDecoder) str() (string, bool) {
	start := f.pos + 1
	end, esc, ok := f.scanString()
	if !ok {
		return "", false
	}
	if !esc {
		return f.s[start:end], true
	}
	return unescape(f.d[start:end])
}

// scanString validates the string at the opening quote and moves past its
// closing quote; end is the offset of the closing quote, esc reports a
// backslash. The rules are strictjson's: no raw control characters, valid
// UTF-8 only, and escapes checked by unescape when esc is set.
func (f *fastDecoder) scanString() (end int, esc, ok bool) {
	d := f.d
	i := f.pos + 1
	for {
		// Eight bytes at a time while none needs a look, then byte by byte.
		for i+8 <= len(d) && !hasSpecialByte(binary.LittleEndian.Uint64(d[i:])) {
			i += 8
		}
		for i < len(d) && plainASCII[d[i]] {
			i++
		}
		if i >= len(d) {
			return 0, false, false
		}
		switch c := d[i]; {
		case c == '"':
			f.pos = i + 1
			return i, esc, true
		case c == '\\':
			// Skip the escaped byte so an escaped quote does not end the
			// string; unescape validates the escape itself.
			esc = true
			i += 2
		case c < 0x20:
			return 0, false, false
		default: // c >= 0x80
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				return 0, false, false
			}
			i += size
		}
	}
}

// hasSpecialByte reports whether any byte of w (eight string bytes) is
// not plainASCII: below 0x20, '"', '\\' or at least 0x80. It uses the
// classic "has a zero/less-than byte" bit tricks, which can report a false
// positive only above a true one, never a false negative; a positive just
// sends the scan to the exact byte loop.
func hasSpecialByte(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := w ^ (lo * '"')
	b := w ^ (lo * '\\')
	return ((w-lo*0x20)&^w|(q-lo)&^q|(b-lo)&^b|w)&hi != 0
}

// plainASCII marks bytes a string may hold verbatim with no further check:
// printable ASCII other than '"' and '\\'.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unescape decodes the body of a string that contains escapes (raw bytes
// were validated by scanString), giving up on any escape strictjson rejects.
func unescape(b []byte) (string, bool) {
	buf := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if b[i] != '\\' {
			buf = append(buf, b[i])
			i++
			continue
		}
		var err error
		if buf, i, err = strictjson.AppendEscape(buf, b, i); err != nil {
			return "", false
		}
	}
	return string(buf), true
}

// number skips whitespace, then scans an RFC 8259 number (the grammar strictjson
// applies) and returns its literal's bounds in s. A leading zero ends the
// integer part, so "01" scans as "0" and the stray "1" then fails the
// caller's separator check, as in strictjson.
func (f *fastDecoder) number() (start, end int, ok bool) {
	f.ws()
	d := f.d
	start = f.pos
	i := f.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return 0, 0, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return 0, 0, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		if i == j {
			return 0, 0, false
		}
	}
	f.pos = i
	return start, i, true
}

// uint reads a number that must be written as plain decimal digits of at
// most maxDigits (no sign, fraction or exponent) and returns its value.
// Other spellings of integers (8e3, 8000.0) give up: the reference decoder
// accepts them, slowly.
func (f *fastDecoder) uint(maxDigits int) (int64, bool) {
	start, end, ok := f.number()
	if !ok || end-start > maxDigits {
		return 0, false
	}
	var x int64
	for _, c := range f.d[start:end] {
		if c < '0' || c > '9' {
			return 0, false
		}
		x = x*10 + int64(c-'0')
	}
	return x, true
}

// skip reads and discards one value of any type (an unknown member),
// applying every syntax rule, duplicate detection included.
func (f *fastDecoder) skip() bool {
	switch c := f.peek(); {
	case c == '"':
		_, ok := f.str()
		return ok
	case c == '{':
		if !f.open() {
			return false
		}
		base := len(f.keys)
		for first := true; ; first = false {
			_, more, ok := f.member(base, first)
			if !ok {
				return false
			}
			if !more {
				return true
			}
			if !f.skip() {
				return false
			}
		}
	case c == '[':
		if !f.open() {
			return false
		}
		for first := true; ; first = false {
			more, ok := f.elem(first)
			if !ok {
				return false
			}
			if !more {
				return true
			}
			if !f.skip() {
				return false
			}
		}
	case c == 't':
		return f.literal("true")
	case c == 'f':
		return f.literal("false")
	case c == 'n':
		return f.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		_, _, ok := f.number()
		return ok
	}
	return false
}

// literal consumes word at f.pos.
func (f *fastDecoder) literal(word string) bool {
	if len(f.d)-f.pos < len(word) || string(f.d[f.pos:f.pos+len(word)]) != word {
		return false
	}
	f.pos += len(word)
	return true
}
