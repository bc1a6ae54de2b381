package api

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Errors of request decoding, in the one place their text is made. They follow axum's Json
// extractor, which runs serde_json through serde_path_to_error: a syntax error (malformed
// JSON, a body cut short, trailing data) is 400 "Failed to parse the request body as JSON:
// ...", and a data error (a wrong type, an out-of-range number, a duplicate field, a value
// that is not an object) is 422 "Failed to deserialize the JSON body into the target type:
// path: ...". Messages carry serde_json's wording and its "at line L column C" suffix,
// computed from jsontext's byte offsets; columns count bytes from 1.

const (
	syntaxPrefix = "Failed to parse the request body as JSON: "
	dataPrefix   = "Failed to deserialize the JSON body into the target type: "
)

// decodeErr converts a decoding failure for body type t into the handler's error. An
// *httpError passes through; anything unrecognised is a data error rather than dropped.
func decodeErr(body []byte, t reflect.Type, err error) error {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		off, msg := int(syn.ByteOffset), syntaxMsg(syn.Err)
		if off < len(body) && body[off] == ',' {
			off = valueStart(body, off) // jsontext may flag a trailing comma at the comma
		}
		if off < len(body) && body[off] == '}' && msg == "expected value" {
			msg = "key must be a string" // serde's word for a '}' after a comma
		}
		return syntaxErrAt(body, off, msg)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return syntaxErrAt(body, len(body), "EOF while parsing a value")
	}
	var sem *json.SemanticError
	if !errors.As(err, &sem) {
		return &httpError{errUnprocessable, dataPrefix + err.Error()}
	}
	ptr, off := sem.JSONPointer, int(sem.ByteOffset)
	var ae *arrayError
	if errors.As(sem.Err, &ae) {
		var inner *json.SemanticError
		if !errors.As(ae.err, &inner) {
			return &httpError{errUnprocessable, dataPrefix + ae.err.Error()}
		}
		ptr, off = jsontext.Pointer(string(ptr)+string(inner.JSONPointer)), int(ae.off)+int(inner.ByteOffset)
	}
	path, goType := serdePath(t, ptr)
	off = valueStart(body, off)
	val := valueAt(body, off)
	return dataErrAt(body, off, path, dataMsg(val, deref(goType)))
}

// dataMsg is serde's message for JSON value val that does not fit Go type gt.
func dataMsg(val jsontext.Value, gt reflect.Type) string {
	want := serdeType(gt)
	if val.Kind() == '0' && gt != nil {
		integer := !bytes.ContainsAny(val, ".eE")
		switch gt.Kind() {
		case reflect.Uint64, reflect.Uint32, reflect.Int64:
			if integer {
				return "invalid value: integer `" + string(val) + "`, expected " + want
			}
		case reflect.Float64, reflect.Float32:
			return "invalid value: floating point `" + string(val) + "`, expected " + want
		}
	}
	return "invalid type: " + describe(val) + ", expected " + want
}

// serdeType names a Go type the way serde's "expected ..." does.
func serdeType(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.Uint64:
		return "u64"
	case reflect.Uint32:
		return "u32"
	case reflect.Int64:
		return "i64"
	case reflect.Float64:
		return "f64"
	case reflect.Float32:
		return "f32"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a sequence"
	case reflect.Array:
		return "an array of length " + strconv.Itoa(t.Len())
	case reflect.Map:
		return "a map"
	case reflect.Struct:
		return "struct " + t.Name()
	}
	return t.String()
}

// describe names a JSON value in serde's words.
func describe(val jsontext.Value) string {
	switch val.Kind() {
	case '"':
		var s string
		if err := json.Unmarshal(val, &s, jsontext.AllowInvalidUTF8(true)); err == nil {
			return "string " + strconv.Quote(s)
		}
		return "string"
	case '{':
		return "map"
	case '[':
		return "sequence"
	case 't', 'f':
		return "boolean `" + string(val) + "`"
	case 'n':
		return "null"
	case '0':
		if bytes.ContainsAny(val, ".eE") {
			return "floating point `" + string(val) + "`"
		}
		return "integer `" + string(val) + "`"
	}
	return "value"
}

// valueStart skips whitespace, ':' and ',' from off: jsontext reports the offset after the
// previous token, serde the position of the value.
func valueStart(body []byte, off int) int {
	for off >= 0 && off < len(body) && strings.IndexByte(" \t\r\n:,", body[off]) >= 0 {
		off++
	}
	return min(max(off, 0), len(body))
}

// valueAt returns the JSON value starting at body[off:], or nil when there is none.
func valueAt(body []byte, off int) jsontext.Value {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body[off:]), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	v, err := dec.ReadValue()
	if err != nil {
		return nil
	}
	return v
}

// syntaxMsg is serde_json's wording for a jsontext syntax error.
func syntaxMsg(err error) string {
	if err == io.ErrUnexpectedEOF {
		return "EOF while parsing a value"
	}
	if err == jsontext.ErrNonStringName {
		return "key must be a string"
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, m := range syntaxWords {
		if strings.Contains(msg, m.jsontext) {
			return m.serde
		}
	}
	return "expected value"
}

// syntaxWords maps fragments of jsontext's messages to serde_json's (first match wins).
var syntaxWords = []struct{ jsontext, serde string }{
	{"after top-level value", "trailing characters"},
	{"object name", "key must be a string"},
	{"after object name", "expected `:`"},
	{"after object value", "expected `,` or `}`"},
	{"after array element", "expected `,` or `]`"},
	{"after array value", "expected `,` or `]`"},
	{"max depth", "recursion limit exceeded"},
	{"escape", "invalid escape"},
	{"in string", "control character (\\u0000-\\u001F) found while parsing a string"},
	{"in number", "invalid number"},
	{"in literal", "expected ident"},
	{"EOF", "EOF while parsing a value"},
}

// syntaxErrAt is a 400 at byte offset off.
func syntaxErrAt(body []byte, off int, msg string) error {
	return &httpError{errMalformedJSON, syntaxPrefix + msg + position(body, off)}
}

// dataErrAt is a 422 at byte offset off; path is serde's path of the value ("" at the top).
func dataErrAt(body []byte, off int, path, msg string) error {
	if path != "" {
		msg = path + ": " + msg
	}
	return &httpError{errUnprocessable, dataPrefix + msg + position(body, off)}
}

// position is serde's " at line L column C" for byte offset off of body (columns from 1).
// It is only called while building an error, so its linear scan never runs on a request
// that decodes.
func position(body []byte, off int) string {
	off = min(max(off, 0), len(body))
	head := body[:off]
	line := bytes.Count(head, []byte{'\n'}) + 1
	col := off - (bytes.LastIndexByte(head, '\n') + 1) + 1
	return " at line " + strconv.Itoa(line) + " column " + strconv.Itoa(col)
}

func itoa(i int) string { return strconv.Itoa(i) }
