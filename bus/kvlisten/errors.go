package kvlisten

import "errors"

// Sentinel errors. Functions wrap them with %w and extra context; match them
// with errors.Is.
var (
	// ErrInvalidConfig reports a Config that Start cannot run with.
	ErrInvalidConfig = errors.New("kvlisten: invalid config")
	// ErrInvalidEndpoint reports an endpoint string that is not a usable
	// tcp://host:port, ipc://path or inproc://name address.
	ErrInvalidEndpoint = errors.New("kvlisten: invalid ZMQ endpoint")
	// ErrMalformed reports a live or replayed message whose frames do not
	// have the expected shape.
	ErrMalformed = errors.New("kvlisten: malformed message")
	// ErrDial reports a failed connection attempt (TCP connect or ZMTP
	// handshake, including a handshake that exceeded Config.DialTimeout).
	ErrDial = errors.New("kvlisten: dial failed")
	// ErrReceive reports that an established SUB connection broke.
	ErrReceive = errors.New("kvlisten: receive failed")
	// ErrReplay reports a replay request that could not be sent or answered.
	ErrReplay = errors.New("kvlisten: replay failed")
	// ErrClosed is returned by operations on a closed Listener.
	ErrClosed = errors.New("kvlisten: listener closed")
)
