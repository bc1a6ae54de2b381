package api

import (
	"errors"
	"net/http"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

// statusTable maps each sentinel error to its HTTP status. It is the only place that does.
var statusTable = []struct {
	err    error
	status int
}{
	{core.ErrBadRequest, http.StatusBadRequest},
	{core.ErrUnprocessable, http.StatusUnprocessableEntity},
	{core.ErrNotFound, http.StatusNotFound},
	{core.ErrConflict, http.StatusConflict},
	{core.ErrOverloaded, http.StatusTooManyRequests},
	{core.ErrNotReady, http.StatusServiceUnavailable},
	{core.ErrNoEndpoints, http.StatusServiceUnavailable},
	{core.ErrInternal, http.StatusInternalServerError},
	{errBodyTooLarge, http.StatusRequestEntityTooLarge},
	{errUnsupportedMedia, http.StatusUnsupportedMediaType},
	{errMalformedJSON, http.StatusBadRequest},
	{errInvalidPath, http.StatusBadRequest},
	{errUnprocessable, http.StatusUnprocessableEntity},
	// Limits (guard.go): the body-memory budget is a transient server condition (503 with
	// Retry-After, like the connection cap), not the client's fault; a body cut by the read
	// deadline is 408 Request Timeout.
	{errBodyBudget, http.StatusServiceUnavailable},
	{errBodyTimeout, http.StatusRequestTimeout},
	// Table and request bounds (core/engine/limits.go): a request over the per-request token or
	// hash limit is 413 (the body is too large for this server, the limit is in the message);
	// a full booking table is 429 (frees make room: retry later); a full catalog table is 507
	// (only deleting workers makes room).
	{engine.ErrTooLarge, http.StatusRequestEntityTooLarge},
	{engine.ErrTooManyBookings, http.StatusTooManyRequests},
	{engine.ErrTableFull, http.StatusInsufficientStorage},
}

// statusOf returns the HTTP status of err (500 when unmapped).
func statusOf(err error) int {
	for _, e := range statusTable {
		if errors.Is(err, e.err) {
			return e.status
		}
	}
	return http.StatusInternalServerError
}

// errorBody is Dynamo's error envelope; details is present for queue rejections only.
type errorBody struct {
	Error   string `json:"error"`
	Details any    `json:"details,omitempty"`
}

// writeError writes err with its mapped status.
func writeError(w http.ResponseWriter, err error) {
	body := errorBody{Error: err.Error()}
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Details != nil {
		body.Details = ee.Details
	}
	writeJSON(w, statusOf(err), body)
}
