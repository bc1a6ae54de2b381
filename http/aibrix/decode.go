package aibrix

import (
	"errors"
	"fmt"

	"github.com/kvselect/kvselect/http/aibrix/internal/strictjson"
)

// Sentinel errors of request decoding. [DecodeRequest] returns a
// [*RequestError] wrapping exactly one of them.
var (
	// ErrEmptyBody: the body holds no JSON value.
	ErrEmptyBody = errors.New("empty request body")
	// ErrMalformedJSON: the body is not well-formed JSON (or nests too deep).
	ErrMalformedJSON = errors.New("malformed JSON")
	// ErrDuplicateMember: an object repeats a member name.
	ErrDuplicateMember = errors.New("duplicate JSON member")
	// ErrTrailingData: something other than whitespace follows the document.
	ErrTrailingData = errors.New("trailing data after JSON document")
	// ErrInvalidRequest: the JSON is well-formed but breaks a schema rule.
	ErrInvalidRequest = errors.New("invalid replica selection request")
)

// RequestError describes why a request was rejected, precisely enough to
// become a Problem Details body: Field is the JSON path of the offending
// member ("" for the whole document), Title a short stable summary and
// Detail the specific violation. Detail never contains credentials; it may
// quote request values, which came from the caller.
type RequestError struct {
	Field  string
	Title  string
	Detail string
	err    error
}

func (e *RequestError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%v: %s: %s", e.err, e.Field, e.Detail)
	}
	return fmt.Sprintf("%v: %s", e.err, e.Detail)
}

// Unwrap returns the sentinel.
func (e *RequestError) Unwrap() error { return e.err }

// Titles of schema violations, stable for clients that match on them.
const (
	titleMissing   = "Missing required member"
	titleNull      = "Null value for member"
	titleType      = "Wrong JSON type"
	titleValue     = "Invalid member value"
	titleDuplicate = "Duplicate value"
)

func invalid(field, title, format string, args ...any) *RequestError {
	return &RequestError{Field: field, Title: title, Detail: fmt.Sprintf(format, args...), err: ErrInvalidRequest}
}

// DecodeRequest parses and validates a ReplicaSelectionRequest body. It is
// pure (no I/O, no clock) and never panics. Unknown members are ignored at
// every level (the contract's additionalProperties: true); optional members
// must be omitted rather than null; required members must be present and
// non-null.
//
// Ownership: the returned Request does not alias body; the caller may reuse
// body immediately. All strings of the Request share one copy of body, so
// the copy lives as long as any of them does.
//
// Precedence of errors: syntax problems (empty, malformed, duplicate
// member, trailing data) are found by the parser before any schema rule;
// schema rules are checked in document order within an object, and missing
// required members are reported after the object's present members were
// checked.
func DecodeRequest(body []byte) (*Request, error) {
	// The single-pass decoder accepts only what decodeTree accepts and
	// builds the same Request; it gives up (without a verdict) on anything
	// unusual, which includes every invalid body. decodeTree then produces
	// the precise error, so errors and their precedence have one definition.
	if req, ok := decodeFast(body); ok {
		return req, nil
	}
	return decodeTree(body)
}

// decodeTree is the reference decoder: it parses body into a strictjson
// tree and validates it member by member. It defines every error
// DecodeRequest reports and is the oracle the differential tests hold
// decodeFast to.
func decodeTree(body []byte) (*Request, error) {
	doc, err := strictjson.Parse(body)
	if err != nil {
		return nil, syntaxProblem(err)
	}
	defer doc.Release() // the Request keeps only strings, which stay valid
	root := doc.Root()
	if root.Kind() != strictjson.Object {
		return nil, invalid("", titleType, "the document must be a JSON object, got %s", root.Kind())
	}
	var (
		req                   Request
		haveAPI, haveKind     bool
		metadata, spec        strictjson.Value
		haveMetadata, hasSpec bool
	)
	for m := root.First(); m.Valid(); m = m.Next() {
		switch m.Key() {
		case "apiVersion":
			s, err := requiredString("apiVersion", m)
			if err != nil {
				return nil, err
			}
			if s != APIVersion {
				return nil, invalid("apiVersion", titleValue, "must be %q, got %q", APIVersion, s)
			}
			haveAPI = true
		case "kind":
			s, err := requiredString("kind", m)
			if err != nil {
				return nil, err
			}
			if s != KindRequest {
				return nil, invalid("kind", titleValue, "must be %q, got %q", KindRequest, s)
			}
			haveKind = true
		case "metadata":
			metadata, haveMetadata = m, true
		case "spec":
			spec, hasSpec = m, true
		}
	}
	switch {
	case !haveAPI:
		return nil, invalid("apiVersion", titleMissing, "apiVersion is required")
	case !haveKind:
		return nil, invalid("kind", titleMissing, "kind is required")
	case !haveMetadata:
		return nil, invalid("metadata", titleMissing, "metadata is required")
	case !hasSpec:
		return nil, invalid("spec", titleMissing, "spec is required")
	}
	if err := decodeMetadata(metadata, &req); err != nil {
		return nil, err
	}
	if err := decodeSpec(spec, &req); err != nil {
		return nil, err
	}
	return &req, nil
}

// syntaxProblem maps a strictjson error onto the package sentinels. The
// Field of a duplicate member is the path of the repeated member itself,
// so a client sees "spec.candidates[0].id" rather than the enclosing object.
func syntaxProblem(err error) *RequestError {
	var se *strictjson.SyntaxError
	if !errors.As(err, &se) {
		return &RequestError{Title: "Malformed JSON", Detail: err.Error(), err: ErrMalformedJSON}
	}
	re := &RequestError{Field: se.Path}
	switch {
	case errors.Is(err, strictjson.ErrEmpty):
		re.Title, re.err = "Empty body", ErrEmptyBody
		re.Detail = "the request body must hold one JSON object"
	case errors.Is(err, strictjson.ErrDuplicateMember):
		re.Title, re.err = "Duplicate JSON member", ErrDuplicateMember
		re.Detail = fmt.Sprintf("member %q appears more than once in the same object (byte %d)", se.Name, se.Offset)
		re.Field = joinPath(se.Path, se.Name)
	case errors.Is(err, strictjson.ErrTrailingData):
		re.Title, re.err = "Trailing data", ErrTrailingData
		re.Detail = fmt.Sprintf("only one JSON value is allowed; found more input at byte %d", se.Offset)
	default:
		re.Title, re.err = "Malformed JSON", ErrMalformedJSON
		re.Detail = fmt.Sprintf("%s at byte %d", se.Msg, se.Offset)
	}
	return re
}

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

// requiredString checks a required string member (null counts as missing).
func requiredString(field string, v strictjson.Value) (string, error) {
	switch v.Kind() {
	case strictjson.String:
		return v.Str(), nil
	case strictjson.Null:
		return "", invalid(field, titleMissing, "%s is required and must not be null", field)
	default:
		return "", invalid(field, titleType, "must be a string, got %s", v.Kind())
	}
}

// requiredObject checks a required object member (null counts as missing).
func requiredObject(field string, v strictjson.Value) error {
	switch v.Kind() {
	case strictjson.Object:
		return nil
	case strictjson.Null:
		return invalid(field, titleMissing, "%s is required and must not be null", field)
	default:
		return invalid(field, titleType, "must be an object, got %s", v.Kind())
	}
}

// optionalKind checks an optional member: present members must have kind k;
// null is rejected because the contract says optional members are omitted.
func optionalKind(field string, v strictjson.Value, k strictjson.Kind) error {
	switch v.Kind() {
	case k:
		return nil
	case strictjson.Null:
		return invalid(field, titleNull, "optional members must be omitted instead of null")
	default:
		return invalid(field, titleType, "must be a%s %s, got %s", article(k), k, v.Kind())
	}
}

func article(k strictjson.Kind) string {
	if k == strictjson.Object || k == strictjson.Array {
		return "n"
	}
	return ""
}

// decodeMetadata validates metadata: a required object whose requestId is
// a required string of 1..MaxIDBytes bytes. UTF-8 validity is guaranteed by
// the parser. Unknown members (including a decisionId, which only responses
// carry) are ignored.
func decodeMetadata(v strictjson.Value, req *Request) error {
	if err := requiredObject("metadata", v); err != nil {
		return err
	}
	id, ok := v.Get("requestId")
	if !ok {
		return invalid("metadata.requestId", titleMissing, "metadata.requestId is required")
	}
	s, err := requiredString("metadata.requestId", id)
	if err != nil {
		return err
	}
	if s == "" || len(s) > MaxIDBytes {
		return invalid("metadata.requestId", titleValue, "must be 1..%d UTF-8 bytes, got %d", MaxIDBytes, len(s))
	}
	req.RequestID = s
	return nil
}

// decodeSpec validates spec: model (non-empty string), policyMode (exact
// enum), the optional policyContext.attributes, and candidates. The model
// is used verbatim: kvselect neither normalises nor changes it.
func decodeSpec(v strictjson.Value, req *Request) error {
	if err := requiredObject("spec", v); err != nil {
		return err
	}
	var haveModel, haveMode, haveCandidates bool
	for m := v.First(); m.Valid(); m = m.Next() {
		switch m.Key() {
		case "model":
			s, err := requiredString("spec.model", m)
			if err != nil {
				return err
			}
			if s == "" {
				return invalid("spec.model", titleValue, "must be a non-empty string")
			}
			req.Model, haveModel = s, true
		case "policyMode":
			s, err := requiredString("spec.policyMode", m)
			if err != nil {
				return err
			}
			if s != string(Advisory) && s != string(Authoritative) {
				return invalid("spec.policyMode", titleValue, "must be %q or %q, got %q", Advisory, Authoritative, s)
			}
			req.PolicyMode, haveMode = PolicyMode(s), true
		case "policyContext":
			if err := optionalKind("spec.policyContext", m, strictjson.Object); err != nil {
				return err
			}
			if a, ok := m.Get("attributes"); ok {
				attrs, err := decodeAttributes("spec.policyContext.attributes", a)
				if err != nil {
					return err
				}
				req.PolicyContext = attrs
			}
		case "candidates":
			if err := decodeCandidates(m, req); err != nil {
				return err
			}
			haveCandidates = true
		}
	}
	switch {
	case !haveModel:
		return invalid("spec.model", titleMissing, "spec.model is required")
	case !haveMode:
		return invalid("spec.policyMode", titleMissing, "spec.policyMode is required")
	case !haveCandidates:
		return invalid("spec.candidates", titleMissing, "spec.candidates is required")
	}
	return nil
}
