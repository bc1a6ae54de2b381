package api

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// maxBody is Dynamo's request body limit (8 MiB).
const maxBody = 8 << 20

// Decoding failures, mapped to statuses in errors.go.
var (
	errBodyTooLarge     = errors.New("body too large")
	errUnsupportedMedia = errors.New("unsupported media type")
	errMalformedJSON    = errors.New("malformed JSON")
	errInvalidPath      = errors.New("invalid path parameter")
	errUnprocessable    = errors.New("unprocessable JSON")
	errBodyBudget       = errors.New("request body memory budget exhausted")
	errBodyTimeout      = errors.New("request body read deadline passed")
)

// httpError is a decoding failure with its client-visible text.
type httpError struct {
	kind error
	msg  string
}

func (e *httpError) Error() string { return e.msg }
func (e *httpError) Unwrap() error { return e.kind }

// decodeJSON reads a JSON object body into v the way axum's Json extractor does: the content
// type must be application/json or application/*+json (415, checked before the body is read),
// the body at most 8 MiB (413), syntax errors are 400 and data errors (wrong types, duplicate
// fields, a body that is not an object) 422. Field names match case-sensitively and unknown
// fields are ignored (jsondecode.go).
func decodeJSON[T any](w http.ResponseWriter, r *http.Request, v *T) error {
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		return &httpError{errUnsupportedMedia, "Expected request with `Content-Type: application/json`"}
	}
	// The body is read whole before decoding (axum's Bytes extractor does the same), so the
	// 413 for an oversized body wins over any syntax error inside it.
	buf, err := readBody(w, r)
	if err != nil {
		return err
	}
	err = decodeBody(*buf, v)
	putBody(buf) // nothing decoded aliases the body: every string was copied out
	return err
}

// isJSONContentType reports whether a Content-Type header names JSON. The exact common value
// is accepted without parsing (mime.ParseMediaType allocates).
func isJSONContentType(ct string) bool {
	if ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")))
}

// bodyPool recycles request body buffers. Buffers that grew past maxPooledBody are dropped so
// that one huge request does not pin its memory.
var bodyPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

const maxPooledBody = 1 << 20

func putBody(b *[]byte) {
	if cap(*b) <= maxPooledBody {
		*b = (*b)[:0]
		bodyPool.Put(b)
	}
}

// maxPrealloc bounds the buffer sized from a declared Content-Length before any byte has
// arrived: a client that declares 8 MiB and then stalls holds at most this much. Larger
// bodies grow by doubling as their bytes arrive.
const maxPrealloc = 64 << 10

// readBody reads the whole body into a pooled buffer (return it with putBody). A declared
// Content-Length within the limit is trusted for sizing up to maxPrealloc (net/http already
// stops the body there); otherwise the read is capped by http.MaxBytesReader, which also makes
// the server close the connection rather than drain an oversized body. Behind a Guard, every
// growth of the buffer is reserved from the guard's body budget first (503 when it is full),
// and a read cut by the server's read deadline is 408.
func readBody(w http.ResponseWriter, r *http.Request) (*[]byte, error) {
	bb, _ := r.Body.(*budgetBody)
	var src io.Reader = r.Body
	if r.ContentLength < 0 || r.ContentLength > maxBody {
		src = http.MaxBytesReader(w, r.Body, maxBody)
	}
	bp := bodyPool.Get().(*[]byte)
	b := (*bp)[:0]
	if n := int(r.ContentLength); n >= 0 && n <= maxBody && cap(b) < n+1 {
		size := min(n+1, maxPrealloc) // +1: the final Read sees EOF without growing the buffer
		if bb != nil && !bb.reserve(int64(size)) {
			putBody(bp)
			return nil, budgetErr(w, bb)
		}
		b = make([]byte, 0, size)
	}
	// Read until EOF into the spare capacity, growing only when full.
	// With a declared length the buffer already has one spare byte, so the read that returns
	// EOF needs no growth and a typical body costs no allocation at all.
	for {
		if len(b) == cap(b) {
			// Double, up to the declared length: the buffers outgrown stay garbage until the
			// next GC, so they are reserved too (never released before the request ends), and
			// doubling keeps their sum below the final size.
			size := max(2*cap(b), 4<<10)
			if n := int(r.ContentLength); n >= len(b) && n < maxBody+1 {
				size = min(size, n+1)
			}
			if bb != nil && !bb.reserve(int64(size)) {
				*bp = b
				putBody(bp)
				return nil, budgetErr(w, bb)
			}
			b = append(make([]byte, 0, size), b...)
		}
		n, err := src.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			*bp = b
			return bp, nil
		}
		if err != nil {
			*bp = b
			putBody(bp)
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return nil, &httpError{errBodyTooLarge, "Failed to buffer the request body: length limit exceeded"}
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				if bb != nil {
					bb.timedOut = true
				}
				w.Header().Set("Connection", "close")
				return nil, &httpError{errBodyTimeout, "Failed to read the request body: the read deadline passed (slow body cut)"}
			}
			return nil, &httpError{errMalformedJSON, "Failed to read the request body: " + err.Error()}
		}
	}
}

// budgetErr is the 503 for a body refused by the guard's memory budget; the connection is
// closed so the unread rest of the body is never buffered.
func budgetErr(w http.ResponseWriter, bb *budgetBody) error {
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "1")
	return &httpError{errBodyBudget, "request bodies in flight exceed the server's memory budget (--http-max-body-bytes-in-flight " +
		strconv.FormatInt(bb.g.lim.MaxBodyBytesInFlight, 10) + "); retry later"}
}

// writeJSON writes v as a compact JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"response encoding failed"}`)
	}
	w.Header()["Content-Type"] = jsonContentType // shared value, see jsonencode.go
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
