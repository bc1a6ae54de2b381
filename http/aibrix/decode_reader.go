package aibrix

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// This file is the token layer of request decoding: a jsontext.Decoder
// (go-json-experiment/json, the code that becomes encoding/json/v2) over the
// body, plus the few rules jsontext does not apply by itself. jsontext
// already rejects duplicate member names (compared after unescaping,
// case-sensitively), invalid UTF-8 and lone surrogate escapes, and checks
// RFC 8259 syntax; the reader adds the nesting bound, trailing-data and
// empty-body verdicts, and maps jsontext's errors onto the package
// sentinels in one place (syntaxProblem).

// maxDepth bounds array/object nesting (jsontext's own bound is 10000). The
// protocol's deepest legitimate value is four levels deep
// (spec.candidates[i].attributes).
const maxDepth = 64

// reader walks one body. Invariant: body is the decoder's input (through bb,
// which jsontext reads in place, so InputOffset is an offset into body) and
// str is "" or string(body); every string of a decoded Request is str or a
// substring of it, or a fresh unescaped copy.
type reader struct {
	dec  jsontext.Decoder
	bb   bytes.Buffer
	body []byte
	str  string
	esc  []byte // unquoting scratch for names with escapes

	nameEsc bool // the last name had escapes (it is in esc)
}

var readerPool = sync.Pool{New: func() any { return new(reader) }}

func getReader(body []byte) *reader {
	r := readerPool.Get().(*reader)
	r.body, r.str = body, ""
	r.bb = *bytes.NewBuffer(body)
	r.dec.Reset(&r.bb)
	return r
}

// putReader drops every reference to the body (the decoder's buffer aliases
// it) and recycles r.
func putReader(r *reader) {
	r.body, r.str = nil, ""
	r.bb = bytes.Buffer{}
	r.dec.Reset(&r.bb)
	if cap(r.esc) > 4<<10 {
		r.esc = nil
	}
	readerPool.Put(r)
}

// errUnexpectedToken stands in for a peek that found no value where one
// must be; the ReadToken that follows reports the real syntax error.
var errUnexpectedToken = errors.New("unexpected token")

// peek returns the kind of the next token, or the syntax error that stops it.
func (r *reader) peek() (jsontext.Kind, error) {
	if k := r.dec.PeekKind(); k != 0 {
		return k, nil
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return 0, err
	}
	return 0, errUnexpectedToken
}

// more reports whether the open object or array has another member; a
// syntax error is left for the next read to report.
func (r *reader) more() bool {
	k := r.dec.PeekKind()
	return k != '}' && k != ']'
}

// token reads one token, enforcing maxDepth on every '{' and '['.
func (r *reader) token() error {
	tok, err := r.dec.ReadToken()
	if err != nil {
		return err
	}
	if k := tok.Kind(); (k == '{' || k == '[') && r.dec.StackDepth() > maxDepth {
		return r.tooDeep()
	}
	return nil
}

// name reads an object member name; the result is valid until the next read.
func (r *reader) name() ([]byte, error) {
	if r.dec.PeekKind() != '"' {
		_, err := r.dec.ReadToken() // reports the non-string name at its offset
		if err == nil {
			err = errUnexpectedToken
		}
		return nil, err
	}
	v, err := r.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	if r.nameEsc = bytes.IndexByte(v, '\\') >= 0; !r.nameEsc {
		return v[1 : len(v)-1], nil
	}
	r.esc, err = jsontext.AppendUnquote(r.esc[:0], v)
	return r.esc, err
}

// text reads a string value (the caller peeked '"').
func (r *reader) text() (string, error) {
	v, err := r.dec.ReadValue()
	if err != nil {
		return "", err
	}
	if bytes.IndexByte(v, '\\') >= 0 {
		b, err := jsontext.AppendUnquote(nil, v)
		return string(b), err
	}
	if r.str == "" {
		r.str = string(r.body)
	}
	end := int(r.dec.InputOffset())
	return r.str[end-len(v)+1 : end-1], nil
}

// literal reads a number's literal text (the caller peeked '0').
func (r *reader) literal() ([]byte, error) { return r.dec.ReadValue() }

// skip reads one whole value token by token, so the nesting bound holds in
// values the schema ignores too.
func (r *reader) skip() error {
	depth := r.dec.StackDepth()
	for {
		if err := r.token(); err != nil {
			return err
		}
		if r.dec.StackDepth() == depth {
			return nil
		}
	}
}

// finish reads on until the member value pending at stack depth d is
// complete (length n0+1 at that level): after a schema error in a member,
// it brings the walk back to the enclosing object.
func (r *reader) finish(d int, n0 int64) error {
	for {
		if r.dec.StackDepth() == d {
			if _, n := r.dec.StackIndex(d); n > n0 {
				return nil
			}
		}
		if err := r.token(); err != nil {
			return err
		}
	}
}

// end reads whatever is left of the document after a schema error (its
// syntax errors take precedence) and then checks for trailing data.
func (r *reader) end() error {
	for r.dec.StackDepth() > 0 {
		if err := r.token(); err != nil {
			return err
		}
	}
	off := int(r.dec.InputOffset())
	if rest := bytes.TrimLeft(r.body[off:], " \t\r\n"); len(rest) > 0 {
		return &RequestError{Title: "Trailing data", err: ErrTrailingData,
			Detail: fmt.Sprintf("only one JSON value is allowed; found more input at byte %d", len(r.body)-len(rest))}
	}
	return nil
}

func (r *reader) tooDeep() error {
	return &RequestError{Field: r.path(r.dec.StackPointer()), Title: "Malformed JSON", err: ErrMalformedJSON,
		Detail: fmt.Sprintf("JSON nesting too deep: more than %d levels at byte %d", maxDepth, r.dec.InputOffset()-1)}
}

// syntaxProblem maps an error of the token layer onto the package
// sentinels; a *RequestError passes through. This is the one place that
// knows jsontext's errors. The Field of a duplicate member is the path of
// the repeated member itself, so a client sees "spec.candidates[0].id"
// rather than the enclosing object.
func (r *reader) syntaxProblem(err error) *RequestError {
	var re *RequestError
	if errors.As(err, &re) {
		return re
	}
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return &RequestError{Field: r.path(r.dec.StackPointer()), Title: "Malformed JSON", err: ErrMalformedJSON,
			Detail: fmt.Sprintf("%v at byte %d", err, r.dec.InputOffset())}
	}
	if se.Err == jsontext.ErrDuplicateName {
		return &RequestError{Field: r.path(se.JSONPointer), Title: "Duplicate JSON member", err: ErrDuplicateMember,
			Detail: fmt.Sprintf("member %q appears more than once in the same object (byte %d)", se.JSONPointer.LastToken(), se.ByteOffset)}
	}
	msg := "malformed JSON"
	switch {
	case se.Err == io.ErrUnexpectedEOF:
		msg = "unexpected end of input"
	case se.Err != nil:
		msg = strings.TrimPrefix(se.Err.Error(), "jsontext: ")
	}
	return &RequestError{Field: r.path(se.JSONPointer), Title: "Malformed JSON", err: ErrMalformedJSON,
		Detail: fmt.Sprintf("%s at byte %d", msg, se.ByteOffset)}
}

// path renders a JSON pointer as a problem Field ("spec.candidates[2].id"),
// taking from the decoder's stack whether each level is an array or object.
func (r *reader) path(p jsontext.Pointer) string {
	var b strings.Builder
	i := 0
	for tok := range p.Tokens() {
		i++
		if i <= r.dec.StackDepth() {
			if k, _ := r.dec.StackIndex(i); k == '[' {
				b.WriteString("[" + tok + "]")
				continue
			}
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// kindName names a jsontext kind the way problem details do.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '[':
		return "array"
	case '{':
		return "object"
	}
	return "invalid"
}

// integral reads a number literal whose value is a whole number (JSON
// Schema's "integer": 8000, 8000.0 and 8e3 all qualify) within ±2^53.
func integral(lit []byte) (int64, bool) {
	if x, err := strconv.ParseInt(string(lit), 10, 64); err == nil {
		return x, true
	}
	f, ok := finite(lit)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// finite parses any number literal; ok is false when it overflows to ±Inf.
func finite(lit []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(lit), 64)
	return f, err == nil && !math.IsInf(f, 0)
}

// nameString returns the member name the last name call read as a string
// that outlives the read: a substring of the body copy when it had no
// escapes. It must be called before the member's value is read.
func (r *reader) nameString(name []byte) string {
	if r.nameEsc {
		return string(name)
	}
	if r.str == "" {
		r.str = string(r.body)
	}
	end := int(r.dec.InputOffset()) // just after the name's closing quote
	return r.str[end-1-len(name) : end-1]
}
