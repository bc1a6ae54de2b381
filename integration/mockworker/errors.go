package mockworker

import "errors"

// Sentinel errors. Every error this package returns wraps one of them (match with errors.Is).
var (
	// ErrInvalidConfig: a Config field is out of range or an endpoint is malformed.
	ErrInvalidConfig = errors.New("mockworker: invalid config")
	// ErrBind: a PUB or ROUTER socket could not bind its endpoint.
	ErrBind = errors.New("mockworker: cannot bind endpoint")
	// ErrBadRequest: a request is malformed (empty prompt, unknown DP rank, too long, bad JSON).
	ErrBadRequest = errors.New("mockworker: bad request")
	// ErrBusy: the operation needs an idle cache (Reset while requests hold blocks).
	ErrBusy = errors.New("mockworker: cache in use")
	// ErrClosed: the worker has been closed.
	ErrClosed = errors.New("mockworker: closed")
)
