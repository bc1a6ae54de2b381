package api

import (
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the lexical half of the strict request decoder: a cursor over one request body
// that skips whitespace, reads strings, numbers and literals, and walks the members of objects
// and the elements of arrays. Skipping whole values is in jsonskip.go; the typed half
// (jsonvalues.go, jsonstruct.go) drives both.
//
// Error contract: every method that fails returns a *jsonError (jsonerror.go) and leaves d.pos
// unspecified; callers stop at the first error. Syntax errors carry the offset where the
// grammar broke; EOF inside a value is its own message, as in serde_json.
//
// Semantics follow encoding/json wherever JSON leaves room, because encoding/json is the
// reference the fuzz and property tests compare against:
//   - the grammar is RFC 8259's (no comments, no trailing commas, no leading zeros, no NaN);
//   - nesting deeper than maxDepth arrays and objects is a syntax error (encoding/json's limit);
//   - control characters inside strings are syntax errors; the escapes are exactly
//     \" \\ \/ \b \f \n \r \t \uXXXX;
//   - invalid UTF-8 inside a string is not an error: each invalid byte becomes U+FFFD, and a
//     \u escape of a lone or mismatched surrogate becomes U+FFFD, as encoding/json does.
//
// Ownership: a decoder never copies the body. Views it returns alias either the body or
// d.scratch and are valid only until the next call on the decoder; callers that keep a string
// copy it (string(view)). A decoder is used by one goroutine at a time.

// maxDepth is encoding/json's nesting limit: 10000 open arrays/objects are fine, 10001 are a
// syntax error.
const maxDepth = 10000

// decoder is a cursor over one JSON body.
//
// Invariant: 0 <= pos <= len(buf); depth counts the arrays and objects opened and not yet
// closed along the current path (typed and skipped alike).
type decoder struct {
	buf     []byte
	pos     int
	depth   int
	scratch []byte // unescaped strings (reused; views into it die at the next string read)
}

// isSpace reports JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// ws skips whitespace.
func (d *decoder) ws() {
	for d.pos < len(d.buf) && isSpace(d.buf[d.pos]) {
		d.pos++
	}
}

// peek returns the next non-whitespace byte without consuming it (0 at the end of the body).
func (d *decoder) peek() byte {
	d.ws()
	if d.pos < len(d.buf) {
		return d.buf[d.pos]
	}
	return 0
}

// eof is the syntax error for a body that ends inside a value.
func (d *decoder) eof() error { return d.syntaxErr(len(d.buf), "EOF while parsing a value") }

// unexpected is the syntax error for the byte at d.pos (or EOF) where want was expected.
func (d *decoder) unexpected(want string) error {
	if d.pos >= len(d.buf) {
		return d.eof()
	}
	return d.syntaxErr(d.pos, want)
}

// open consumes the container opener ('{' or '[') at d.pos and counts its depth. The matching
// close (in nextMember, nextElem, afterElem or skipValue) decrements it again.
func (d *decoder) open() error {
	d.pos++
	d.depth++
	if d.depth > maxDepth {
		return d.syntaxErr(d.pos, "recursion limit exceeded")
	}
	return nil
}

// nextMember advances to the next member of an object whose '{' was consumed; i counts the
// members already read. It returns the member's key (a view) with d.pos at its value, or
// more=false after consuming the closing '}'.
func (d *decoder) nextMember(i int) (key []byte, more bool, err error) {
	c := d.peek()
	// '}' ends the object both right after '{' and after a member; after a comma it is
	// reached below as "key must be a string", which is how a trailing comma is rejected.
	if c == '}' {
		d.pos++
		d.depth--
		return nil, false, nil
	}
	if i > 0 {
		if c != ',' {
			return nil, false, d.unexpected("expected `,` or `}`")
		}
		d.pos++
		c = d.peek()
	}
	// Keys are unescaped before they are matched, so "worker\u005fid" is worker_id (JSON's
	// rule, and both serde_json's and encoding/json's).
	if c != '"' {
		return nil, false, d.unexpected("key must be a string")
	}
	if key, err = d.str(); err != nil {
		return nil, false, err
	}
	if d.peek() != ':' {
		return nil, false, d.unexpected("expected `:`")
	}
	d.pos++
	d.ws()
	return key, true, nil
}

// nextElem advances to the next element of an array whose '[' was consumed; i counts the
// elements already read. It returns more=false after consuming the closing ']'.
func (d *decoder) nextElem(i int) (more bool, err error) {
	c := d.peek()
	if c == ']' {
		d.pos++
		d.depth--
		return false, nil
	}
	if i > 0 {
		if c != ',' {
			return false, d.unexpected("expected `,` or `]`")
		}
		d.pos++
		d.ws()
	}
	// After a comma the element itself is not checked here: "[1,]" reaches the element
	// reader with ']' under the cursor, which rejects it (a data error there is re-checked as
	// syntax by decodeBody, so the verdict is still 400).
	return true, nil
}

// str reads the string at d.pos (which is '"') and returns its unescaped bytes as a view.
func (d *decoder) str() ([]byte, error) {
	b := d.buf
	start := d.pos + 1
	// Fast path: plain printable ASCII up to the closing quote is returned as a view of the
	// body itself, with no copy. Anything else (an escape, a control character, a non-ASCII
	// byte that must be validated as UTF-8) hands over to strSlow at that byte.
	for i := start; i < len(b); i++ {
		c := b[i]
		if c == '"' {
			d.pos = i + 1
			return b[start:i], nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return d.strSlow(start, i)
		}
	}
	return nil, d.eof()
}

// strSlow finishes a string that has escapes, control characters or non-ASCII bytes; the bytes
// b[start:i] are plain ASCII already scanned.
func (d *decoder) strSlow(start, i int) ([]byte, error) {
	b := d.buf
	// The unescaped text is built in the reused scratch buffer; the caller gets a view of it
	// that the next string read overwrites (every caller copies or only compares it).
	out := append(d.scratch[:0], b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			d.pos = i + 1
			d.scratch = out
			return out, nil
		case c < 0x20:
			return nil, d.syntaxErr(i, "control character (\\u0000-\\u001F) found while parsing a string")
		case c == '\\':
			if i+1 >= len(b) {
				return nil, d.eof()
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
				i += 2
			case 'b':
				out, i = append(out, '\b'), i+2
			case 'f':
				out, i = append(out, '\f'), i+2
			case 'n':
				out, i = append(out, '\n'), i+2
			case 'r':
				out, i = append(out, '\r'), i+2
			case 't':
				out, i = append(out, '\t'), i+2
			case 'u':
				// \uXXXX: four hex digits are required; a body that ends inside them is an
				// EOF rather than a bad escape, as serde_json reports it.
				r, ok := hex4(b, i+2)
				if !ok {
					if i+6 > len(b) && allHex(b[i+2:]) {
						return nil, d.eof()
					}
					return nil, d.syntaxErr(i, "invalid escape")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A valid pair is consumed whole; anything else is U+FFFD and the second
					// escape, if any, is read on its own (encoding/json's rule).
					if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						if r2, ok := hex4(b, i+2); ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								out = utf8.AppendRune(out, dec)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				return nil, d.syntaxErr(i, "invalid escape")
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			// Non-ASCII: a valid sequence is copied as is; each byte of an invalid one
			// becomes U+FFFD (encoding/json's replacement, byte by byte).
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, b[i:i+size]...)
			}
			i += size
		}
	}
	d.scratch = out
	return nil, d.eof()
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// allHex reports whether every byte of b is a hex digit (a \u escape cut short by the end).
func allHex(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// number scans the number at d.pos and returns its literal; integer reports that it has no
// fraction and no exponent. The byte after it is not examined (the caller's structure check
// rejects anything that is not a delimiter).
//
// Grammar (RFC 8259): -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?. A leading zero
// ends the integer part, so "01" scans as "0" followed by a stray '1' that the structure check
// rejects; "-", "1." and "1e" end inside the number and are EOF or "invalid number".
func (d *decoder) number() (lit []byte, integer bool, err error) {
	b, i := d.buf, d.pos
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return nil, false, d.eof()
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil, false, d.syntaxErr(i, "invalid number")
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		if i, err = d.digits(i + 1); err != nil {
			return nil, false, err
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i, err = d.digits(i); err != nil {
			return nil, false, err
		}
	}
	d.pos = i
	return b[start:i], integer, nil
}

// digits scans the one or more digits a fraction or an exponent needs at d.buf[i:] and returns
// the index after them.
func (d *decoder) digits(i int) (int, error) {
	b := d.buf
	if i >= len(b) {
		return i, d.eof()
	}
	if b[i] < '0' || b[i] > '9' {
		return i, d.syntaxErr(i, "invalid number")
	}
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i, nil
}

// literal consumes the literal word (true, false or null) at d.pos.
func (d *decoder) literal(word string) error {
	rest := d.buf[d.pos:]
	if len(rest) >= len(word) && string(rest[:len(word)]) == word {
		d.pos += len(word)
		return nil
	}
	// A prefix of the word cut short by the end is an EOF; anything else is a bad literal.
	if len(rest) < len(word) && string(rest) == word[:len(rest)] {
		return d.eof()
	}
	return d.syntaxErr(d.pos, "expected ident")
}

// null consumes a null literal if one is next and reports whether it did (a malformed word
// starting with 'n' is a syntax error).
func (d *decoder) null() (bool, error) {
	if d.peek() != 'n' {
		return false, nil
	}
	return true, d.literal("null")
}
