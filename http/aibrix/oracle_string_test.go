package aibrix

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// sjString scanning. Strings are the bulk of protocol documents (ids,
// attribute names and values), so the common case — no escapes, printable
// ASCII or valid multi-byte UTF-8 — is a table-driven scan that records
// offsets into the shared source string and allocates nothing. Only strings
// with escapes are copied, once, into sjDoc.escaped.
//
// Rejected (sjErrSyntax): raw control characters (< 0x20), invalid UTF-8
// byte sequences, unknown escapes, malformed \u escapes and unpaired
// UTF-16 surrogate escapes. encoding/json would silently replace the last
// three with U+FFFD; a strict peer must not, because a request id altered
// in transit could no longer be echoed "byte for byte".

// str scans a string starting at the opening quote and returns its
// unescaped value. Invalid UTF-8, raw control characters, bad escapes and
// unpaired surrogate escapes are syntax errors.
func (p *sjParser) str() (sjStrRef, error) {
	p.pos++ // opening quote
	start := p.pos
	d := p.data
	// Fast path: no escapes, ASCII or valid UTF-8.
	for p.pos < len(d) {
		for p.pos < len(d) && sjPlainASCII[d[p.pos]] {
			p.pos++
		}
		if p.pos >= len(d) {
			break
		}
		c := d[p.pos]
		switch {
		case c == '"':
			r := sjStrRef{s: int32(start), e: int32(p.pos)}
			p.pos++
			return r, nil
		case c == '\\':
			return p.strSlow(start)
		case c < 0x20:
			return sjStrRef{}, p.fail(sjErrSyntax, "control character in string")
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return sjStrRef{}, p.fail(sjErrSyntax, "invalid UTF-8 in string")
			}
			p.pos += size
		}
	}
	return sjStrRef{}, p.fail(sjErrSyntax, "unterminated string")
}

// sjPlainASCII marks bytes a string may contain verbatim without further
// checks: printable ASCII other than '"' and '\\'.
var sjPlainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (p *sjParser) strSlow(start int) (sjStrRef, error) {
	d := p.data
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, d[start:p.pos]...)
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case c == '"':
			p.pos++
			p.doc.escaped = append(p.doc.escaped, string(buf))
			return sjStrRef{s: int32(len(p.doc.escaped) - 1), esc: true}, nil
		case c == '\\':
			var err error
			if buf, p.pos, err = sjAppendEscape(buf, d, p.pos); err != nil {
				return sjStrRef{}, p.fail(sjErrSyntax, err.Error())
			}
		case c < 0x20:
			return sjStrRef{}, p.fail(sjErrSyntax, "control character in string")
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return sjStrRef{}, p.fail(sjErrSyntax, "invalid UTF-8 in string")
			}
			buf = append(buf, d[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
	return sjStrRef{}, p.fail(sjErrSyntax, "unterminated string")
}

// Malformed escapes, as sjAppendEscape reports them.
var (
	sjErrUnterminatedEscape = errors.New("unterminated escape")
	sjErrBadEscapeChar      = errors.New("invalid escape character")
	sjErrBadUnicodeEscape   = errors.New(`invalid \u escape`)
	sjErrUnpairedSurrogate  = errors.New("unpaired surrogate escape")
)

// sjAppendEscape decodes the escape whose backslash is at b[i], appends its UTF-8 to buf and
// returns the extended buffer and the offset just past the escape. A malformed escape (unknown
// character, bad or truncated \u digits, a surrogate that is not a high one followed by an
// escaped low one) returns an error and, as the offset, where the fault is. The sjParser and the
// AIBrix fast decoder both use it, so they accept and reject exactly the same escapes.
func sjAppendEscape(buf, b []byte, i int) ([]byte, int, error) {
	if i+1 >= len(b) {
		return buf, i, sjErrUnterminatedEscape
	}
	switch e := b[i+1]; e {
	case '"', '\\', '/':
		return append(buf, e), i + 2, nil
	case 'b':
		return append(buf, '\b'), i + 2, nil
	case 'f':
		return append(buf, '\f'), i + 2, nil
	case 'n':
		return append(buf, '\n'), i + 2, nil
	case 'r':
		return append(buf, '\r'), i + 2, nil
	case 't':
		return append(buf, '\t'), i + 2, nil
	case 'u':
	default:
		return buf, i + 1, sjErrBadEscapeChar
	}
	r, ok := hex4(b, i+2)
	if !ok {
		return buf, i + 2, sjErrBadUnicodeEscape
	}
	i += 6
	if utf16.IsSurrogate(r) {
		// Must be a high surrogate followed by \u and a low surrogate.
		if r >= 0xdc00 || i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
			return buf, i, sjErrUnpairedSurrogate
		}
		r2, ok := hex4(b, i+2)
		if !ok {
			return buf, i + 2, sjErrBadUnicodeEscape
		}
		i += 6
		if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
			return buf, i, sjErrUnpairedSurrogate
		}
	}
	return utf8.AppendRune(buf, r), i, nil
}

// hex4 decodes the four sjHex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
