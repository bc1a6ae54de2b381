package api

// The error table is the only place that maps errors to statuses; these tests pin every entry,
// check that the entries cannot shadow each other, and check the body writeError produces.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

// wantStatuses is the contract of spec §2.1 plus axum's extraction rejections.
var wantStatuses = []struct {
	name   string
	err    error
	status int
}{
	{"bad request", core.ErrBadRequest, 400},
	{"unprocessable", core.ErrUnprocessable, 422},
	{"not found", core.ErrNotFound, 404},
	{"conflict", core.ErrConflict, 409},
	{"overloaded", core.ErrOverloaded, 429},
	{"not ready", core.ErrNotReady, 503},
	{"no endpoints", core.ErrNoEndpoints, 503},
	{"internal", core.ErrInternal, 500},
	{"body too large", errBodyTooLarge, 413},
	{"unsupported media", errUnsupportedMedia, 415},
	{"malformed JSON", errMalformedJSON, 400},
	{"invalid path", errInvalidPath, 400},
	{"unprocessable JSON", errUnprocessable, 422},
	{"body budget", errBodyBudget, 503},
	{"body timeout", errBodyTimeout, 408},
	{"request too large", engine.ErrTooLarge, 413},
	{"too many bookings", engine.ErrTooManyBookings, 429},
	{"table full", engine.ErrTableFull, 507},
}

// TestStatusTable checks each sentinel's status, bare, wrapped with %w (twice) and inside an
// engine.Error, and that the table has no entry this test does not pin.
func TestStatusTable(t *testing.T) {
	if len(statusTable) != len(wantStatuses) {
		t.Fatalf("statusTable has %d entries, the test pins %d: pin the new ones", len(statusTable), len(wantStatuses))
	}
	for _, tc := range wantStatuses {
		// The forms errors actually take: a bare sentinel, fmt.Errorf wrapping (once and
		// twice), the engine's error type and the decoder's.
		forms := []error{
			tc.err,
			fmt.Errorf("context: %w", tc.err),
			fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", tc.err)),
			&engine.Error{Kind: tc.err, Msg: "message"},
			&httpError{kind: tc.err, msg: "message"},
		}
		for _, err := range forms {
			if got := statusOf(err); got != tc.status {
				t.Errorf("%s: statusOf(%#v) = %d, want %d", tc.name, err, got, tc.status)
			}
		}
	}
	for _, err := range []error{errors.New("unmapped"), fmt.Errorf("wrapped: %w", errors.New("x")), nil} {
		if got := statusOf(err); got != http.StatusInternalServerError {
			t.Errorf("statusOf(%v) = %d, want 500", err, got)
		}
	}
	// Well-known errors built by core map through their sentinel.
	if got := statusOf(core.ErrReplicaSyncDisabled); got != http.StatusConflict {
		t.Errorf("replica sync disabled = %d, want 409", got)
	}
}

// TestStatusTableEntriesAreDisjoint checks that no entry's error matches another entry, so the
// table's order can never change an answer.
func TestStatusTableEntriesAreDisjoint(t *testing.T) {
	for i, a := range statusTable {
		for j, b := range statusTable {
			if i != j && errors.Is(a.err, b.err) {
				t.Errorf("entry %d (%v) matches entry %d (%v)", i, a.err, j, b.err)
			}
		}
	}
}

// TestWriteError checks the envelope: the client-visible message, details only when an engine
// error carries them, and the mapped status.
func TestWriteError(t *testing.T) {
	cases := []struct {
		err    error
		status int
		body   string
	}{
		{&engine.Error{Kind: core.ErrNotFound, Msg: "reservation r not found"}, 404, `{"error":"reservation r not found"}`},
		{&engine.Error{Kind: core.ErrOverloaded, Msg: "all eligible workers are overloaded", Details: map[string]any{"limit_kind": "tokens", "limit": 5}},
			429, `{"error":"all eligible workers are overloaded","details":{"limit":5,"limit_kind":"tokens"}}`},
		{&httpError{errMalformedJSON, "Failed to parse the request body as JSON: x"}, 400, `{"error":"Failed to parse the request body as JSON: x"}`},
		{errors.New("boom"), 500, `{"error":"boom"}`},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		writeError(rec, tc.err)
		if rec.Code != tc.status || rec.Body.String() != tc.body {
			t.Errorf("writeError(%v) = %d %s, want %d %s", tc.err, rec.Code, rec.Body, tc.status, tc.body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
	}
}

// TestWriteJSONEncodingFailure checks that a value encoding/json cannot encode becomes a 500
// envelope instead of a truncated or mislabelled body.
func TestWriteJSONEncodingFailure(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]any{"x": make(chan int)})
	var m map[string]string
	if rec.Code != http.StatusInternalServerError || json.Unmarshal(rec.Body.Bytes(), &m) != nil || m["error"] == "" {
		t.Fatalf("got %d %s, want a 500 error envelope", rec.Code, rec.Body)
	}
}
