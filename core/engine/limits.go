package engine

import "errors"

// Limit sentinels (mapped to HTTP statuses in http/api/errors.go, like the others). Every
// bounded table and per-request limit refuses with one of them and a message that names the
// limit and its value.
var (
	// ErrTooLarge: one request exceeds a per-request limit (tokens, hashes) (HTTP 413).
	ErrTooLarge = errors.New("request too large")
	// ErrTooManyBookings: the booking table is full, in total or for the chosen worker; frees
	// make room, so the caller may retry (HTTP 429).
	ErrTooManyBookings = errors.New("too many bookings")
	// ErrTableFull: a catalog table (workers, partitions) is at its configured size; only
	// deleting entries makes room (HTTP 507 Insufficient Storage).
	ErrTableFull = errors.New("table full")
)

func tooLarge(format string, args ...any) *Error { return errorf(ErrTooLarge, format, args...) }
func tableFull(format string, args ...any) *Error { return errorf(ErrTableFull, format, args...) }
func tooManyBookings(format string, args ...any) *Error {
	return errorf(ErrTooManyBookings, format, args...)
}
