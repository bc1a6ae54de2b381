package strictjson

import (
	"unicode/utf16"
	"unicode/utf8"
)

// String scanning. Strings are the bulk of protocol documents (ids,
// attribute names and values), so the common case — no escapes, printable
// ASCII or valid multi-byte UTF-8 — is a table-driven scan that records
// offsets into the shared source string and allocates nothing. Only strings
// with escapes are copied, once, into Doc.escaped.
//
// Rejected (ErrSyntax): raw control characters (< 0x20), invalid UTF-8
// byte sequences, unknown escapes, malformed \u escapes and unpaired
// UTF-16 surrogate escapes. encoding/json would silently replace the last
// three with U+FFFD; a strict peer must not, because a request id altered
// in transit could no longer be echoed "byte for byte".

// str scans a string starting at the opening quote and returns its
// unescaped value. Invalid UTF-8, raw control characters, bad escapes and
// unpaired surrogate escapes are syntax errors.
func (p *parser) str() (strRef, error) {
	p.pos++ // opening quote
	start := p.pos
	d := p.data
	// Fast path: no escapes, ASCII or valid UTF-8.
	for p.pos < len(d) {
		for p.pos < len(d) && plainASCII[d[p.pos]] {
			p.pos++
		}
		if p.pos >= len(d) {
			break
		}
		c := d[p.pos]
		switch {
		case c == '"':
			r := strRef{s: int32(start), e: int32(p.pos)}
			p.pos++
			return r, nil
		case c == '\\':
			return p.strSlow(start)
		case c < 0x20:
			return strRef{}, p.fail(ErrSyntax, "control character in string")
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return strRef{}, p.fail(ErrSyntax, "invalid UTF-8 in string")
			}
			p.pos += size
		}
	}
	return strRef{}, p.fail(ErrSyntax, "unterminated string")
}

// plainASCII marks bytes a string may contain verbatim without further
// checks: printable ASCII other than '"' and '\\'.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (p *parser) strSlow(start int) (strRef, error) {
	d := p.data
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, d[start:p.pos]...)
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case c == '"':
			p.pos++
			p.doc.escaped = append(p.doc.escaped, string(buf))
			return strRef{s: int32(len(p.doc.escaped) - 1), esc: true}, nil
		case c == '\\':
			if p.pos+1 >= len(d) {
				return strRef{}, p.fail(ErrSyntax, "unterminated escape")
			}
			e := d[p.pos+1]
			p.pos += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return strRef{}, p.fail(ErrSyntax, "invalid \\u escape")
				}
				if utf16.IsSurrogate(r) {
					// Must be a high surrogate followed by \u low surrogate.
					if r >= 0xdc00 || p.pos+1 >= len(d) || d[p.pos] != '\\' || d[p.pos+1] != 'u' {
						return strRef{}, p.fail(ErrSyntax, "unpaired surrogate escape")
					}
					p.pos += 2
					r2, ok := p.hex4()
					if !ok {
						return strRef{}, p.fail(ErrSyntax, "invalid \\u escape")
					}
					r = utf16.DecodeRune(r, r2)
					if r == utf8.RuneError {
						return strRef{}, p.fail(ErrSyntax, "unpaired surrogate escape")
					}
				}
				buf = utf8.AppendRune(buf, r)
			default:
				p.pos--
				return strRef{}, p.fail(ErrSyntax, "invalid escape character")
			}
		case c < 0x20:
			return strRef{}, p.fail(ErrSyntax, "control character in string")
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(d[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return strRef{}, p.fail(ErrSyntax, "invalid UTF-8 in string")
			}
			buf = append(buf, d[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
	return strRef{}, p.fail(ErrSyntax, "unterminated string")
}

func (p *parser) hex4() (rune, bool) {
	if p.pos+4 > len(p.data) {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
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
	p.pos += 4
	return r, true
}
