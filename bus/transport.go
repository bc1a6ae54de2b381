package bus

import (
	"context"
	"errors"
	"time"
)

// Transport is the small slice of NATS the replicator needs: fire-and-forget
// fan-out publish, subscriptions with a serial handler, and request/reply.
// It exists so the replicator can run over a real server ([NATSTransport])
// or in memory ([MemNetwork]); both pass one conformance suite
// (transport_conformance_test.go), which is the normative statement of the
// contract below.
//
// Contract for every implementation:
//
//   - Publish is at-most-once and never blocks on receivers. It copies data
//     before returning, so the caller may reuse the buffer at once. It
//     succeeds when nobody is subscribed (the message is simply gone) and
//     fails fast with an error wrapping [ErrDisconnected] while the
//     connection is down (no buffering of stale events), [ErrClosed] after
//     the transport is closed, [ErrPayloadTooLarge] above the size limit.
//   - Messages from one Transport to one subscription arrive in publish
//     order, across subjects. There is no order across publishers.
//   - Each subscription delivers to its handler from one goroutine: calls
//     never overlap. Handlers must return quickly (hand work to a bounded
//     queue); a subscription that falls behind drops messages and counts
//     them in Dropped.
//   - Each delivered [Msg] has a private copy of the data; the handler owns
//     it and may keep or modify it.
//   - After Unsubscribe returns, the handler is not called for messages
//     published afterwards.
//   - Subscriptions match subjects with NATS rules: exact, or with '*' (one token) and a
//     final '>' (one or more tokens); the replicator subscribes to `...<kind>.*`.
//   - Request publishes data with a private reply subject and returns the
//     first reply. It fails at once with [ErrNoResponders] when no
//     subscription exists for subject, and with [ErrTimeout] when ctx ends
//     first (a ctx without deadline gets [DefaultRequestTimeout]).
//     A responder answers by publishing to Msg.Reply.
//   - Flush returns once every prior Publish and Subscribe of this
//     Transport has reached the server (so a subscription is effective for
//     publishers on other connections).
//
// All methods are safe for concurrent use.
type Transport interface {
	Publish(subject string, data []byte) error
	Subscribe(subject string, h Handler) (Subscription, error)
	Request(ctx context.Context, subject string, data []byte) ([]byte, error)
	Flush(ctx context.Context) error
}

// Msg is one delivered message. The handler owns Data.
type Msg struct {
	Subject string
	Reply   string // non-empty for requests: publish the answer here
	Data    []byte
}

// Handler receives messages of one subscription, one call at a time.
type Handler func(m Msg)

// Subscription is a live interest in one subject.
type Subscription interface {
	// Unsubscribe stops delivery. Calling it twice returns an error
	// wrapping [ErrClosed] (or the implementation's equivalent).
	Unsubscribe() error
	// Dropped returns how many messages this subscription discarded
	// because its handler fell behind.
	Dropped() int
}

// DefaultRequestTimeout bounds Request and Flush when ctx has no deadline.
const DefaultRequestTimeout = 5 * time.Second

// Transport errors. Implementations wrap the underlying cause as well, so
// both errors.Is(err, ErrX) and errors.Is(err, nats.ErrY) work.
var (
	// ErrNoResponders: a request found nobody subscribed to its subject.
	ErrNoResponders = errors.New("bus: no responders")
	// ErrTimeout: a request or flush did not complete before its deadline.
	ErrTimeout = errors.New("bus: timeout")
	// ErrDisconnected: the connection is down (reconnecting); nothing was sent.
	ErrDisconnected = errors.New("bus: disconnected")
	// ErrClosed: the transport or subscription was closed.
	ErrClosed = errors.New("bus: closed")
	// ErrPayloadTooLarge: the message exceeds the server's max payload.
	ErrPayloadTooLarge = errors.New("bus: payload too large")
)

// withDeadline gives ctx the default deadline if it has none.
func withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultRequestTimeout)
}
