package aibrix

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/kvselect/kvselect/internal/jsonw"
)

// Problem is an RFC 9457 Problem Details body. Type is a URN naming the
// class of failure (stable, matchable by clients); Title is a short summary
// of that class; Detail explains this occurrence; Field, an extension
// member, is the JSON path of the offending request member when there is one.
//
// Problem bodies never contain credentials: callers build Detail only from
// request values and fixed text.
type Problem struct {
	Type   string
	Title  string
	Status int
	Detail string
	Field  string
}

// Problem type URNs.
const (
	ProblemInvalidRequest   = "urn:kvselect:aibrix:invalid-request"
	ProblemMalformedJSON    = "urn:kvselect:aibrix:malformed-json"
	ProblemDuplicateMember  = "urn:kvselect:aibrix:duplicate-member"
	ProblemTrailingData     = "urn:kvselect:aibrix:trailing-data"
	ProblemEmptyBody        = "urn:kvselect:aibrix:empty-body"
	ProblemRequestIDHeader  = "urn:kvselect:aibrix:request-id-header"
	ProblemUnauthorized     = "urn:kvselect:aibrix:unauthorized"
	ProblemMethod           = "urn:kvselect:aibrix:method-not-allowed"
	ProblemUnsupportedMedia = "urn:kvselect:aibrix:unsupported-media-type"
	ProblemBodyTooLarge     = "urn:kvselect:aibrix:body-too-large"
	ProblemNotFound         = "urn:kvselect:aibrix:not-found"
	ProblemInternal         = "urn:kvselect:aibrix:internal-error"
	ProblemDecisionIDSource = "urn:kvselect:aibrix:decision-id-unavailable"
)

// problemFromDecode maps a [DecodeRequest] error to its Problem. This is the
// single table from request-decoding sentinels to statuses.
func problemFromDecode(err error) Problem {
	var re *RequestError
	if !errors.As(err, &re) {
		return Problem{Type: ProblemInvalidRequest, Title: "Invalid request", Status: http.StatusBadRequest, Detail: err.Error()}
	}
	p := Problem{Title: re.Title, Status: http.StatusBadRequest, Detail: re.Detail, Field: re.Field}
	switch {
	case errors.Is(err, ErrEmptyBody):
		p.Type = ProblemEmptyBody
	case errors.Is(err, ErrDuplicateMember):
		p.Type = ProblemDuplicateMember
	case errors.Is(err, ErrTrailingData):
		p.Type = ProblemTrailingData
	case errors.Is(err, ErrMalformedJSON):
		p.Type = ProblemMalformedJSON
	default:
		p.Type = ProblemInvalidRequest
	}
	return p
}

// AppendProblem appends the compact JSON encoding of p. Members: type,
// title, status, detail (omitted when empty), field (omitted when empty).
func AppendProblem(dst []byte, p *Problem) []byte {
	dst = append(dst, `{"type":`...)
	dst = jsonw.AppendString(dst, p.Type)
	dst = append(dst, `,"title":`...)
	dst = jsonw.AppendString(dst, p.Title)
	dst = append(dst, `,"status":`...)
	dst = strconv.AppendInt(dst, int64(p.Status), 10)
	if p.Detail != "" {
		dst = append(dst, `,"detail":`...)
		dst = jsonw.AppendString(dst, p.Detail)
	}
	if p.Field != "" {
		dst = append(dst, `,"field":`...)
		dst = jsonw.AppendString(dst, p.Field)
	}
	return append(dst, '}')
}

// writeProblem sends p with the problem media type. Responses are never
// cached.
//
// Headers the status requires (Allow for 405, WWW-Authenticate for 401)
// are set by the caller before writeProblem, which only adds the content
// headers.
func writeProblem(w http.ResponseWriter, p *Problem) {
	body := AppendProblem(make([]byte, 0, 256), p)
	h := w.Header()
	h.Set("Content-Type", ProblemMediaType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
