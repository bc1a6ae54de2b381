package engine

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the engine returns wraps exactly one of them, so an adapter (the
// HTTP layer, an embedding program) maps errors to its own vocabulary with errors.Is and one table.
// The wrapped message is the client-visible text; it follows Dynamo's wording where clients or
// tests match substrings of it.
var (
	// ErrBadRequest: the input is well-formed JSON of the right types but semantically invalid
	// (HTTP 400).
	ErrBadRequest = errors.New("bad request")
	// ErrUnprocessable: a required field is missing or a field has an invalid value that serde
	// would have rejected while deserialising (HTTP 422).
	ErrUnprocessable = errors.New("unprocessable entity")
	// ErrNotFound: an unknown worker, reservation, pending selection or rank (HTTP 404).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a duplicate reservation id, or a configuration clash (HTTP 409).
	ErrConflict = errors.New("conflict")
	// ErrNotReady: the partition has no schedulable worker, or the service is shutting down
	// (HTTP 503).
	ErrNotReady = errors.New("not ready")
	// ErrNoEndpoints: every candidate was filtered out (HTTP 503).
	ErrNoEndpoints = errors.New("no endpoints")
	// ErrOverloaded: every eligible worker is busy or a queue limit was hit (HTTP 429).
	ErrOverloaded = errors.New("overloaded")
	// ErrInternal: an invariant the engine could not keep (HTTP 500).
	ErrInternal = errors.New("internal error")
)

// Error is an engine error: a client-visible message wrapping one sentinel.
type Error struct {
	Kind error  // one of the sentinels above
	Msg  string // client-visible message
	// Details carries structured data for some kinds (queue rejections); nil otherwise.
	Details any
}

func (e *Error) Error() string { return e.Msg }

// Unwrap lets errors.Is match the sentinel.
func (e *Error) Unwrap() error { return e.Kind }

func errorf(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *Error { return errorf(ErrBadRequest, format, args...) }
func unprocessable(format string, args ...any) *Error {
	return errorf(ErrUnprocessable, format, args...)
}
func notFound(format string, args ...any) *Error { return errorf(ErrNotFound, format, args...) }
func conflict(format string, args ...any) *Error { return errorf(ErrConflict, format, args...) }
func notReady(format string, args ...any) *Error { return errorf(ErrNotReady, format, args...) }
