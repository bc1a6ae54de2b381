package aibrix

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
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
// body immediately. All strings of the Request share one copy of body (an
// escaped string gets its own), so the copy lives as long as any of them does.
//
// Precedence of errors: syntax problems (empty, malformed, duplicate
// member, trailing data) win over every schema rule, wherever they are in
// the body; schema rules are checked in document order within an object,
// and missing required members are reported after the object's present
// members were checked; at the top level apiVersion and kind come first,
// then missing members, then metadata, then spec.
func DecodeRequest(body []byte) (*Request, error) {
	return new(requestSlot).decode(body)
}

// requestSlot is a Request whose arrays a Handler reuses from one exchange
// to the next (requests are garbage as soon as the answer is written, and
// their arrays are most of what decoding allocates). Owned by one
// exchange at a time; release clears every string so a pooled slot pins
// no body.
//
// Invariant after a successful decode: every candidate's Ports and
// Attributes, and PolicyContext, are windows (len == cap) of ports and
// attrs, so appending to one can never overwrite another's.
type requestSlot struct {
	req   Request
	cands []Candidate
	ports []int
	attrs Attributes
	seen  map[string]int // candidate ids, for requests with more than 8
}

// maxPooled bounds the arrays a slot keeps for the next exchange.
const maxPooled = 4096

// decode decodes body into the slot; the result is valid until release.
func (st *requestSlot) decode(body []byte) (*Request, error) {
	if len(bytes.TrimLeft(body, " \t\r\n")) == 0 {
		return nil, &RequestError{Title: "Empty body", Detail: "the request body must hold one JSON object", err: ErrEmptyBody}
	}
	r := getReader(body)
	defer putReader(r)
	st.req = Request{}
	if cap(st.cands) == 0 {
		// A fresh slot: size the arrays once from a cheap count of '[' (every candidate has
		// a ports array; a hint only, the arrays still grow if it is wrong), so a decode
		// allocates a fixed number of times rather than once per doubling.
		n := bytes.Count(body, []byte{'['})
		st.cands, st.ports, st.attrs = make([]Candidate, 0, n), make([]int, 0, 2*n), make(Attributes, 0, 2*n+2)
		if n > 8 {
			st.seen = make(map[string]int, n)
		}
	}
	st.cands, st.ports, st.attrs = st.cands[:0], st.ports[:0], st.attrs[:0]
	err := r.request(st)
	if err == nil || errors.Is(err, ErrInvalidRequest) {
		if serr := r.end(); serr != nil {
			err = serr
		}
	}
	if err != nil {
		return nil, r.syntaxProblem(err)
	}
	return &st.req, nil
}

// release forgets the last request's strings; oversized arrays are
// dropped so one huge request cannot pin memory in the pool.
func (st *requestSlot) release() {
	clear(st.cands)
	clear(st.attrs)
	clear(st.seen)
	st.req = Request{}
	if cap(st.cands) > maxPooled || cap(st.attrs) > 4*maxPooled || cap(st.ports) > 4*maxPooled || len(st.seen) > maxPooled {
		*st = requestSlot{}
	}
}

// request decodes the document into st.req.
func (r *reader) request(st *requestSlot) error {
	k, err := r.peek()
	if err != nil {
		return err
	}
	if k != '{' {
		if err := r.skip(); err != nil {
			return err
		}
		return invalid("", titleType, "the document must be a JSON object, got %s", kindName(k))
	}
	if err := r.token(); err != nil {
		return err
	}
	var haveAPI, haveKind, haveMetadata, haveSpec bool
	var metaErr, specErr error // deferred: reported after missing members
	for r.more() {
		name, err := r.name()
		if err != nil {
			return err
		}
		_, n0 := r.dec.StackIndex(1)
		switch string(name) {
		case "apiVersion":
			if err := r.constant("apiVersion", APIVersion); err != nil {
				return err
			}
			haveAPI = true
		case "kind":
			if err := r.constant("kind", KindRequest); err != nil {
				return err
			}
			haveKind = true
		case "metadata":
			haveMetadata = true
			if metaErr = r.metadata(&st.req); metaErr != nil {
				if !errors.Is(metaErr, ErrInvalidRequest) {
					return metaErr
				}
				if err := r.finish(1, n0); err != nil {
					return err
				}
			}
		case "spec":
			haveSpec = true
			if specErr = r.spec(st); specErr != nil {
				if !errors.Is(specErr, ErrInvalidRequest) {
					return specErr
				}
				if err := r.finish(1, n0); err != nil {
					return err
				}
			}
		default:
			if err := r.skip(); err != nil {
				return err
			}
		}
	}
	if err := r.token(); err != nil {
		return err
	}
	switch {
	case !haveAPI:
		return invalid("apiVersion", titleMissing, "apiVersion is required")
	case !haveKind:
		return invalid("kind", titleMissing, "kind is required")
	case !haveMetadata:
		return invalid("metadata", titleMissing, "metadata is required")
	case !haveSpec:
		return invalid("spec", titleMissing, "spec is required")
	case metaErr != nil:
		return metaErr
	}
	return specErr
}

// constant checks a required string member that must equal want.
func (r *reader) constant(field, want string) error {
	s, err := r.requiredString(field)
	if err == nil && s != want {
		err = invalid(field, titleValue, "must be %q, got %q", want, s)
	}
	return err
}

// requiredString reads a required string member (null counts as missing).
func (r *reader) requiredString(field string) (string, error) {
	k, err := r.peek()
	switch {
	case err != nil:
		return "", err
	case k == '"':
		return r.text()
	case k == 'n':
		return "", invalid(field, titleMissing, "%s is required and must not be null", field)
	}
	return "", invalid(field, titleType, "must be a string, got %s", kindName(k))
}

// requiredObject opens a required object member (null counts as missing).
func (r *reader) requiredObject(field string) error {
	k, err := r.peek()
	switch {
	case err != nil:
		return err
	case k == '{':
		return r.token()
	case k == 'n':
		return invalid(field, titleMissing, "%s is required and must not be null", field)
	}
	return invalid(field, titleType, "must be an object, got %s", kindName(k))
}

// optional checks an optional member: present members must have kind want
// ('{' is opened); null is rejected because the contract says optional
// members are omitted.
func (r *reader) optional(field string, want jsontext.Kind) error {
	k, err := r.peek()
	switch {
	case err != nil:
		return err
	case k == want || (want == 't' && k == 'f'):
		if k == '{' {
			return r.token()
		}
		return nil
	case k == 'n':
		return invalid(field, titleNull, "optional members must be omitted instead of null")
	}
	article := ""
	if want == '{' || want == '[' {
		article = "n"
	}
	return invalid(field, titleType, "must be a%s %s, got %s", article, kindName(want), kindName(k))
}

// metadata validates metadata: a required object whose requestId is a
// required string of 1..MaxIDBytes bytes (UTF-8 validity is jsontext's).
// Unknown members (including a decisionId, which only responses carry) are
// ignored.
func (r *reader) metadata(req *Request) error {
	if err := r.requiredObject("metadata"); err != nil {
		return err
	}
	var idErr error
	haveID := false
	for r.more() {
		name, err := r.name()
		if err != nil {
			return err
		}
		if string(name) != "requestId" {
			if err := r.skip(); err != nil {
				return err
			}
			continue
		}
		haveID = true
		s, err := r.requiredString("metadata.requestId")
		switch {
		case err != nil:
			return err
		case s == "" || len(s) > MaxIDBytes:
			idErr = invalid("metadata.requestId", titleValue, "must be 1..%d UTF-8 bytes, got %d", MaxIDBytes, len(s))
		}
		req.RequestID = s
	}
	if err := r.token(); err != nil {
		return err
	}
	if !haveID {
		return invalid("metadata.requestId", titleMissing, "metadata.requestId is required")
	}
	return idErr
}
