package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
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
)

// httpError is a decoding failure with its client-visible text.
type httpError struct {
	kind error
	msg  string
}

func (e *httpError) Error() string { return e.msg }
func (e *httpError) Unwrap() error { return e.kind }

// decodeJSON reads a JSON object body into v the way axum's Json extractor does: the content
// type must be application/json (415), the body at most 8 MiB (413), syntax errors are 400 and
// type errors or missing required fields 422. Unknown fields are ignored.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !(mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))) {
		return &httpError{errUnsupportedMedia, "Expected request with `Content-Type: application/json`"}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &httpError{errBodyTooLarge, "Failed to buffer the request body: length limit exceeded"}
		}
		return &httpError{errMalformedJSON, "Failed to read the request body: " + err.Error()}
	}
	return unmarshal(body, v)
}

// unmarshal decodes one JSON value, rejecting trailing data.
func unmarshal(body []byte, v any) error {
	// Every body is a JSON object. encoding/json decodes a bare null into a struct as a no-op,
	// which would run the handler on an empty request; serde rejects it as a data error (422).
	if bytes.Equal(bytes.Trim(body, " \t\r\n"), []byte("null")) {
		return &httpError{errUnprocessable, "Failed to deserialize the JSON body into the target type: invalid type: null, expected a JSON object"}
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	if err := dec.Decode(v); err != nil {
		return classify(err)
	}
	if dec.More() {
		return &httpError{errMalformedJSON, "Failed to parse the request body as JSON: trailing characters"}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &httpError{errMalformedJSON, "Failed to parse the request body as JSON: trailing characters"}
	}
	return nil
}

// classify maps an encoding/json error to axum's split between syntax (400) and data (422).
func classify(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &httpError{errMalformedJSON, "Failed to parse the request body as JSON: " + err.Error()}
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return &httpError{errUnprocessable, fmt.Sprintf("Failed to deserialize the JSON body into the target type: %s: invalid type: expected %s, got JSON %s", field, te.Type, te.Value)}
	default:
		return &httpError{errUnprocessable, "Failed to deserialize the JSON body into the target type: " + err.Error()}
	}
}

// writeJSON writes v as a compact JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"response encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// okBody is Dynamo's success body for routes without a payload.
var okBody = map[string]string{"status": "ok"}
