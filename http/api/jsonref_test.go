package api

// The reference the strict decoder is compared against: encoding/json, made strict by a
// pre-pass that knows each struct's fields by reflection. The pre-pass walks the body with
// encoding/json's own tokenizer, drops members whose key matches no field exactly (so
// encoding/json's case-insensitive fallback never sees them) and flags a field that appears
// twice; encoding/json then decodes what is left. It shares no decoding code with the decoder
// under test, only the field table (jsonFields, read from the json tags), which the every-field
// binding test (TestEveryFieldBinds) checks against the decoder's own struct binding. It is
// slow, which does not matter here.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/kvselect/kvselect/core"
)

// refDecode decodes body into v (a pointer to a zero struct) and returns the status class the
// strict decoder must produce: 0 (decoded), 400 or 422.
//
// The steps mirror the verdict order both decoders promise: a bare null is 422; the first
// value's syntax is checked whole (Decoder.Decode into a RawMessage runs encoding/json's
// scanner over it), so any syntax error in it is 400 before anything else; a first value that
// is not an object is 422 whatever follows it; a duplicate or any encoding/json type error in
// the filtered object is 422; only then is trailing data 400.
func refDecode(body []byte, v any) int {
	if bytes.Equal(bytes.Trim(body, " \t\r\n"), []byte("null")) {
		return http.StatusUnprocessableEntity
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return http.StatusBadRequest // syntax of the first value, or no value at all
	}
	switch raw[0] {
	case 'n':
		// null followed by more: encoding/json decodes the null as a no-op and then finds
		// the trailing data below.
	case '{':
		filtered, dup, err := refFilter(raw, reflect.TypeOf(v).Elem())
		if err != nil {
			panic(fmt.Sprintf("reference filter failed on valid JSON %q: %v", raw, err))
		}
		if dup {
			return http.StatusUnprocessableEntity
		}
		if err := json.Unmarshal(filtered, v); err != nil {
			return http.StatusUnprocessableEntity
		}
	default:
		return http.StatusUnprocessableEntity
	}
	if dec.More() {
		return http.StatusBadRequest
	}
	if _, err := dec.Token(); err != io.EOF {
		return http.StatusBadRequest
	}
	return 0
}

// refFilter rewrites one valid JSON value for type t: struct members are kept only under their
// exact field name, and dup reports a field seen twice in one object.
func refFilter(raw []byte, t reflect.Type) (out []byte, dup bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var buf bytes.Buffer
	dup, err = refWalk(dec, t, &buf)
	return buf.Bytes(), dup, err
}

// refWalk copies one value from dec to out, guided by t (nil once the JSON and the type have
// diverged: everything below is copied as is, and encoding/json's type error decides).
// Numbers are copied as their literal (UseNumber), strings re-marshalled after encoding/json
// unescaped them, which keeps every value encoding/json would see.
func refWalk(dec *json.Decoder, t reflect.Type, out *bytes.Buffer) (dup bool, err error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		if tok == '[' {
			var elem reflect.Type
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
				elem = t.Elem()
			}
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				d, err := refWalk(dec, elem, out)
				if err != nil {
					return false, err
				}
				dup = dup || d
			}
			_, err = dec.Token()
			out.WriteByte(']')
			return dup, err
		}
		// An object: a struct's fields by exact name, a map's entries, or (for any other
		// type, which encoding/json will reject) everything as is.
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = jsonFields(t)
		}
		seen := map[string]bool{}
		out.WriteByte('{')
		n := 0
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return false, err
			}
			key := kt.(string)
			var elem reflect.Type
			switch {
			case fields != nil:
				// Exact-case lookup: a key matching a field only case-insensitively is dropped
				// here, so encoding/json's case-folding fallback never binds it.
				ft, ok := fields[key]
				if !ok {
					var skip json.RawMessage
					if err := dec.Decode(&skip); err != nil {
						return false, err
					}
					continue
				}
				if seen[key] {
					dup = true
				}
				seen[key] = true
				elem = ft
			case t != nil && t.Kind() == reflect.Map:
				elem = t.Elem()
			}
			if n > 0 {
				out.WriteByte(',')
			}
			n++
			kb, _ := json.Marshal(key)
			out.Write(kb)
			out.WriteByte(':')
			d, err := refWalk(dec, elem, out)
			if err != nil {
				return false, err
			}
			dup = dup || d
		}
		_, err = dec.Token()
		out.WriteByte('}')
		return dup, err
	case json.Number:
		out.WriteString(string(tok))
	default:
		b, _ := json.Marshal(tok)
		out.Write(b)
	}
	return false, nil
}

// compareDecode decodes body with table t and with the reference, and reports any difference
// in outcome class or, when both decode, in the decoded value. DeepEqual distinguishes nil from
// empty slices and maps, which the engine may treat differently ("block_hashes": [] is not
// an absent field), so those must match too. The error text is only checked for axum's prefix:
// the reference's texts are encoding/json's, not serde's.
func compareDecode[T any](body []byte) error {
	what := reflect.TypeFor[T]().String()
	var mine, ref T
	got := 0
	if err := decodeBody(body, &mine); err != nil {
		got = statusOf(err)
		var he *httpError
		if !errors.As(err, &he) || !(strings.HasPrefix(he.msg, "Failed to parse the request body as JSON: ") ||
			strings.HasPrefix(he.msg, "Failed to deserialize the JSON body into the target type: ")) {
			return fmt.Errorf("%s: error %q is not in axum's format", what, err)
		}
	}
	want := refDecode(body, &ref)
	if got != want {
		return fmt.Errorf("%s: body %q: decoder says %d, reference %d (0 = decoded)", what, body, got, want)
	}
	if got == 0 && !reflect.DeepEqual(mine, ref) {
		return fmt.Errorf("%s: body %q decoded differently:\nmine %#v\nref  %#v", what, body, mine, ref)
	}
	return nil
}

// compareAll runs compareDecode for every request table.
func compareAll(body []byte) error {
	return errors.Join(
		compareDecode[core.SelectRequest](body),
		compareDecode[core.ReservationRequest](body),
		compareDecode[core.PromptQuery](body),
		compareDecode[core.WorkerSpec](body),
		compareDecode[outputBlockRequest](body),
		compareDecode[peerRequest](body),
	)
}

// requestTypes are the Go types of every table, for the coverage test and the generator.
var requestTypes = []struct {
	typ reflect.Type
}{
	{reflect.TypeFor[core.SelectRequest]()},
	{reflect.TypeFor[core.ReservationRequest]()},
	{reflect.TypeFor[core.PromptQuery]()},
	{reflect.TypeFor[core.WorkerSpec]()},
	{reflect.TypeFor[outputBlockRequest]()},
	{reflect.TypeFor[peerRequest]()},
}
