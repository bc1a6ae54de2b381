package api

import "bytes"

// Skipping: the decoder's path for values it does not keep (unknown fields, array elements
// past a Go array's length) and for the syntax check that runs before any data error is
// reported. Skipping validates exactly what reading would (the same grammar, escapes, depth
// limit) but builds nothing: strings are not unescaped and numbers are not converted, so an
// unknown field costs one pass over its bytes and no allocation below 32 levels of nesting.

// skipStr validates the string at d.pos (which is '"') without unescaping it: only what makes
// a string malformed is checked (control characters, bad escapes, a missing closing quote).
// Invalid UTF-8 is not a syntax error in encoding/json, so it is not checked here.
func (d *decoder) skipStr() error {
	b := d.buf
	for i := d.pos + 1; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return nil
		case c < 0x20:
			return d.syntaxErr(i, "control character (\\u0000-\\u001F) found while parsing a string")
		case c == '\\':
			if i+1 >= len(b) {
				return d.eof()
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(b, i+2); !ok {
					if i+6 > len(b) && allHex(b[i+2:]) {
						return d.eof()
					}
					return d.syntaxErr(i, "invalid escape")
				}
				i += 6
			default:
				return d.syntaxErr(i, "invalid escape")
			}
		default:
			i++
		}
	}
	return d.eof()
}

// skipValue validates and skips one value at d.pos (after whitespace), however deeply nested,
// without recursion: stack holds the kinds of the open containers.
//
// It is a two-state machine. In the first state a value is expected: a container is opened
// (and, for an object, its first key read) and the loop continues expecting a value, or a
// scalar is consumed. In the second state a value has just ended: closers pop containers until
// one continues with a comma (then a value is expected again) or the stack is empty (done).
// Recursion would be simpler, but a body of 8 MiB of '[' would then recurse 10000 levels
// before the depth limit; the explicit stack keeps that a flat loop over a byte slice that
// stays on this goroutine's stack up to 32 levels.
func (d *decoder) skipValue() error {
	var stackBuf [32]byte
	stack := stackBuf[:0]
	for {
		// A value is expected here.
		switch c := d.peek(); c {
		case '{', '[':
			if err := d.open(); err != nil {
				return err
			}
			stack = append(stack, c)
			close := byte('}')
			if c == '[' {
				close = ']'
			}
			if d.peek() == close {
				d.pos++
				d.depth--
				stack = stack[:len(stack)-1]
				break
			}
			if c == '{' {
				if err := d.skipKey(); err != nil {
					return err
				}
			}
			continue
		case '"':
			if err := d.skipStr(); err != nil {
				return err
			}
		case 't':
			if err := d.literal("true"); err != nil {
				return err
			}
		case 'f':
			if err := d.literal("false"); err != nil {
				return err
			}
		case 'n':
			if err := d.literal("null"); err != nil {
				return err
			}
		case 0:
			if d.pos >= len(d.buf) {
				return d.eof()
			}
			return d.syntaxErr(d.pos, "expected value")
		default:
			if c != '-' && (c < '0' || c > '9') {
				return d.syntaxErr(d.pos, "expected value")
			}
			if _, _, err := d.number(); err != nil {
				return err
			}
		}
		// A value ended: close containers until one continues with a comma.
		for {
			if len(stack) == 0 {
				return nil
			}
			top := stack[len(stack)-1]
			c := d.peek()
			if c == ',' {
				d.pos++
				if top == '{' {
					if err := d.skipKey(); err != nil {
						return err
					}
				}
				break
			}
			if (top == '{' && c == '}') || (top == '[' && c == ']') {
				d.pos++
				d.depth--
				stack = stack[:len(stack)-1]
				continue
			}
			if top == '{' {
				return d.unexpected("expected `,` or `}`")
			}
			return d.unexpected("expected `,` or `]`")
		}
	}
}

// skipKey skips an object key and its colon, leaving d.pos at the member's value. Skipped
// keys are never matched, so they are not unescaped either.
func (d *decoder) skipKey() error {
	if d.peek() != '"' {
		return d.unexpected("key must be a string")
	}
	if err := d.skipStr(); err != nil {
		return err
	}
	if d.peek() != ':' {
		return d.unexpected("expected `:`")
	}
	d.pos++
	return nil
}

// countHint estimates the number of elements of the array whose '[' was just consumed, from
// the commas before the first ']'. It is exact for flat arrays of numbers and only ever a
// capacity hint: it is bounded by the body's size.
func (d *decoder) countHint() int {
	rest := d.buf[d.pos:]
	end := bytes.IndexByte(rest, ']')
	if end < 0 {
		end = len(rest)
	}
	return bytes.Count(rest[:end], []byte{','}) + 1
}
