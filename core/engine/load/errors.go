package load

import "errors"

// Sentinel errors. Methods wrap them with the offending id or owner using
// %w; callers test with errors.Is. A method that returns an error has changed
// nothing.
var (
	// ErrDuplicate: Add with an id that is already live in this tracker.
	ErrDuplicate = errors.New("load: booking id already live")
	// ErrNotFound: a lifecycle call for an id that is not live in this
	// tracker (never booked, already freed, expired or dropped with its owner).
	ErrNotFound = errors.New("load: booking not found")
	// ErrUnknownOwner: Add for an (worker, rank) that was never added with
	// AddOwner or has been removed.
	ErrUnknownOwner = errors.New("load: unknown owner")
	// ErrInvalidFraction: OutputBlock with a decay fraction outside [0, 1]
	// (or NaN).
	ErrInvalidFraction = errors.New("load: decay fraction outside [0, 1]")
	// ErrOverflow: Add whose prefill tokens would overflow one of the owner's
	// 64-bit active prefill counters (tokens, squares, cross products).
	ErrOverflow = errors.New("load: active prefill tokens overflow")
)
