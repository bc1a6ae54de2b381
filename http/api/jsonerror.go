package api

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
)

// Errors of the strict request decoder. They follow axum's Json extractor, which runs
// serde_json through serde_path_to_error: a syntax error (malformed JSON, a body cut short) is
// 400 "Failed to parse the request body as JSON: ...", and a data error (a wrong type, an
// out-of-range number, a duplicate field, a value that is not an object) is 422 "Failed to
// deserialize the JSON body into the target type: path: ...". Messages carry serde_json's
// wording and its "at line L column C" suffix; positions count bytes, columns from 1.

// jsonError is one decoding failure.
//
// Invariant: path holds the segments from the innermost outwards (it is built while the error
// unwinds through the typed decoders); a field or map-key segment is "." and its name (which
// may be empty or contain anything), an element segment "[i]".
type jsonError struct {
	syntax    bool
	msg       string
	line, col int
	path      []string
}

func (e *jsonError) Error() string {
	var b strings.Builder
	if !e.syntax && len(e.path) > 0 {
		// Field segments carry their leading '.', element segments their brackets; the
		// outermost dot is dropped.
		for i := len(e.path) - 1; i >= 0; i-- {
			seg := e.path[i]
			if i == len(e.path)-1 {
				seg = strings.TrimPrefix(seg, ".")
			}
			b.WriteString(seg)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.msg)
	b.WriteString(" at line ")
	b.WriteString(strconv.Itoa(e.line))
	b.WriteString(" column ")
	b.WriteString(strconv.Itoa(e.col))
	return b.String()
}

// httpErr converts a decoding failure into the handler's error, with axum's prefix and kind.
// Anything that is not a *jsonError cannot come from the decoder; it is reported as a data
// error rather than dropped.
func httpErr(err error) *httpError {
	var je *jsonError
	if !errors.As(err, &je) {
		return &httpError{errUnprocessable, "Failed to deserialize the JSON body into the target type: " + err.Error()}
	}
	if je.syntax {
		return &httpError{errMalformedJSON, "Failed to parse the request body as JSON: " + je.Error()}
	}
	return &httpError{errUnprocessable, "Failed to deserialize the JSON body into the target type: " + je.Error()}
}

// isSyntax reports whether err is a syntax error (400) rather than a data error (422).
func isSyntax(err error) bool {
	var je *jsonError
	return errors.As(err, &je) && je.syntax
}

// at returns the 1-based line and column of byte offset off in buf. It is only called while
// building an error, so its linear scan never runs on a request that decodes.
func at(buf []byte, off int) (line, col int) {
	off = min(max(off, 0), len(buf))
	head := buf[:off]
	line = bytes.Count(head, []byte{'\n'}) + 1
	col = off - (bytes.LastIndexByte(head, '\n') + 1) + 1
	return line, col
}

// syntaxErr is a syntax error at byte offset off.
func (d *decoder) syntaxErr(off int, msg string) error {
	line, col := at(d.buf, off)
	return &jsonError{syntax: true, msg: msg, line: line, col: col}
}

// dataErr is a data error at the current position.
func (d *decoder) dataErr(msg string) error {
	line, col := at(d.buf, d.pos)
	return &jsonError{msg: msg, line: line, col: col}
}

// withPath adds the segment seg (a field name or map key) to a data error unwinding through a
// field; syntax errors pass through unchanged (serde_path_to_error adds paths to both, but a
// syntax error in a skipped value has no typed path, so kvselect reports none for any).
func withPath(err error, seg string) error {
	if je, ok := err.(*jsonError); ok && !je.syntax {
		je.path = append(je.path, "."+seg)
	}
	return err
}

// elemPath is withPath for array element i.
func elemPath(err error, i int) error {
	if je, ok := err.(*jsonError); ok && !je.syntax {
		je.path = append(je.path, "["+strconv.Itoa(i)+"]")
	}
	return err
}

// typeErr is serde's "invalid type" for the value at d.pos, which is not a want. Describing the
// value may read it; a value too malformed to describe is reported by the syntax check that
// follows every data error (see decodeBody).
func (d *decoder) typeErr(want string) error {
	return d.dataErr("invalid type: " + d.describe() + ", expected " + want)
}

// describe names the value at d.pos in serde's words, without moving the cursor.
func (d *decoder) describe() string {
	save, saveDepth := d.pos, d.depth
	defer func() { d.pos, d.depth = save, saveDepth }()
	switch c := d.peek(); {
	case c == '"':
		if s, err := d.str(); err == nil {
			return "string " + strconv.Quote(string(s))
		}
		return "string"
	case c == '{':
		return "map"
	case c == '[':
		return "sequence"
	case c == 't' || c == 'f':
		return "boolean `" + strconv.FormatBool(c == 't') + "`"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		if lit, integer, err := d.number(); err == nil {
			if integer {
				return "integer `" + string(lit) + "`"
			}
			return "floating point `" + string(lit) + "`"
		}
	}
	return "value"
}
