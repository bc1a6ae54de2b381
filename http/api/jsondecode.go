package api

import (
	"bytes"
	"errors"
	"reflect"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Request bodies are decoded by go-json-experiment/json (the code that becomes encoding/json/v2)
// straight into the core/engine request structs, driven by their json tags. Its defaults are
// the serde(derive) rules Dynamo's clients expect: field names match case-sensitively (after
// unescaping), unknown fields are skipped (their syntax still checked), duplicate names and
// trailing data are rejected. What differs from serde is adjusted here:
//   - a repeated unknown field or map key is allowed (serde ignores unknown fields whatever
//     their count; jsontext rejects every repeated name), so a body whose only repetitions are
//     those is decoded again allowing duplicates, and a repeated known field is still 422
//     (jsondup.go);
//   - invalid UTF-8 and lone surrogate escapes in strings become U+FFFD (encoding/json's rule,
//     which the reference tests pin), not a syntax error;
//   - the whole first value's syntax is checked before a data error is reported, so a body
//     with both is 400, as serde reads the whole value first;
//   - error texts are serde_json's through axum (jsonerror.go, the one place they are made).
//
// The token-id and hash arrays are the hot path (a /select body is almost all token ids), so
// they have their own unmarshalers (jsonarrays.go); everything else is the library's.

// decodeOpts are the options of every request decode.
var decodeOpts = json.JoinOptions(
	jsontext.AllowInvalidUTF8(true),
	json.WithUnmarshalers(json.JoinUnmarshalers(
		json.UnmarshalFromFunc(unmarshalU32s),
		json.UnmarshalFromFunc(unmarshalI64s),
		json.UnmarshalFromFunc(unmarshalPair),
	)),
)

// nullBodyMsg is the 422 text for a body that is a bare null.
const nullBodyMsg = "Failed to deserialize the JSON body into the target type: invalid type: null, expected a JSON object"

// decodeBody decodes one JSON object into v, which must be zeroed, and rejects trailing data.
//
// Error precedence is encoding/json's (the reference the tests compare against): the syntax of
// the whole first value is checked before any data error is reported, so a body with both is
// 400; data errors then win over trailing data after the value; trailing data alone is 400.
// A bare null is 422 (encoding/json would decode it as a no-op; serde rejects it).
func decodeBody[T any](body []byte, v *T) error {
	t := reflect.TypeFor[T]()
	if first(body) != '{' {
		return topLevelNotObject(body)
	}
	err := json.Unmarshal(body, v, decodeOpts)
	if err == nil {
		return nil
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && se.Err == jsontext.ErrDuplicateName {
		// Decode again allowing repetitions; a repeated known field is found by the walk.
		var zero T
		*v = zero
		err = json.Unmarshal(body, v, decodeOpts, jsontext.AllowDuplicateNames(true))
		if dup := findDuplicateField(body, t); dup != nil {
			err = dup // a data error: the first value's syntax is checked below
		}
		if err == nil {
			return nil
		}
	}
	if !isSyntactic(err) || isTrailing(body, err) {
		if serr := firstValueSyntax(body); serr != nil {
			return decodeErr(body, t, serr)
		}
	}
	return decodeErr(body, t, err)
}

// first returns the first byte of body after whitespace, or 0.
func first(body []byte) byte {
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) > 0 {
		return b[0]
	}
	return 0
}

// firstValueSyntax checks the syntax of body's first JSON value alone.
func firstValueSyntax(body []byte) error {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	_, err := dec.ReadValue()
	return err
}

// topLevelNotObject classifies a body whose first value is not an object: malformed (400), a
// bare null (422), null followed by more (400, as encoding/json decodes the null as a no-op and
// then finds the trailing data), or any other value (422, whatever follows it).
func topLevelNotObject(body []byte) error {
	dec := jsontext.NewDecoder(bytes.NewBuffer(body), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	val, err := dec.ReadValue()
	if err != nil {
		return decodeErr(body, nil, err)
	}
	if val.Kind() == 'n' {
		rest := bytes.TrimLeft(body[dec.InputOffset():], " \t\r\n")
		if len(rest) == 0 {
			return &httpError{errUnprocessable, nullBodyMsg}
		}
		return syntaxErrAt(body, len(body)-len(rest), "trailing characters")
	}
	return dataErrAt(body, int(dec.InputOffset())-len(val), "", "invalid type: "+describe(val)+", expected a JSON object")
}

func isSyntactic(err error) bool {
	var se *jsontext.SyntacticError
	return errors.As(err, &se)
}

// isTrailing reports whether err is the syntax error of data after the first value, which
// a data error in the value wins over.
func isTrailing(body []byte, err error) bool {
	var se *jsontext.SyntacticError
	return errors.As(err, &se) && firstValueSyntax(body) == nil && strings.Contains(se.Error(), "after top-level value")
}
