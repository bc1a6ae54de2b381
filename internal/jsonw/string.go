// Package jsonw holds the JSON writing primitives shared by kvselect's hand-written response
// encoders (http/api for the Dynamo routes, http/aibrix for the gateway protocol). Both promise
// output that real clients parse exactly as they parse encoding/json's, so the one escaping
// routine lives here and is fuzzed against the standard library once.
package jsonw

import "unicode/utf8"

// Hex is the lower-case digit set used for \u escapes (and by callers that render ids).
const Hex = "0123456789abcdef"

// AppendString appends s as a JSON string literal exactly as encoding/json writes it with HTML
// escaping on (its default): '"' and '\\' backslash-escaped; \b \f \n \r \t by name; other
// control bytes and < > & as \u00XX; U+2028 and U+2029 as \u202X; each byte of invalid UTF-8
// as \ufffd. Runs of bytes that need nothing are copied in one append, so plain ASCII costs
// one scan and one copy. The output is always valid UTF-8 and valid JSON.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', Hex[c>>4], Hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', Hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
