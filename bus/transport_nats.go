package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// NATSTransport implements [Transport] over a *nats.Conn.
//
// Ownership: it does not own the connection; closing the connection is the
// caller's job (and makes every method fail with [ErrClosed]).
type NATSTransport struct {
	nc *nats.Conn
}

var _ Transport = (*NATSTransport)(nil)

// NewNATSTransport wraps nc.
func NewNATSTransport(nc *nats.Conn) *NATSTransport { return &NATSTransport{nc: nc} }

// Connected implements [ConnectionState].
func (t *NATSTransport) Connected() bool { return t.nc.IsConnected() }

// Conn returns the wrapped connection.
func (t *NATSTransport) Conn() *nats.Conn { return t.nc }

// Publish implements [Transport]. With ReconnectBufSize(-1) (see [Connect])
// a publish while reconnecting fails at once with [ErrDisconnected].
func (t *NATSTransport) Publish(subject string, data []byte) error {
	if err := t.nc.Publish(subject, data); err != nil {
		return fmt.Errorf("bus: publish %s: %w", subject, mapNATSError(err))
	}
	return nil
}

// Subscribe implements [Transport] with a plain (non-queue) subscription;
// nats.go runs its handler on one goroutine per subscription. The pending
// limits are nats.go's defaults (500k messages / 64 MiB).
func (t *NATSTransport) Subscribe(subject string, h Handler) (Subscription, error) {
	sub, err := t.nc.Subscribe(subject, func(m *nats.Msg) {
		// m.Data is already a private copy (nats.go processMsg).
		h(Msg{Subject: m.Subject, Reply: m.Reply, Data: m.Data})
	})
	if err != nil {
		return nil, fmt.Errorf("bus: subscribe %s: %w", subject, mapNATSError(err))
	}
	return natsSub{sub}, nil
}

// Request implements [Transport].
func (t *NATSTransport) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	m, err := t.nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		return nil, fmt.Errorf("bus: request %s: %w", subject, mapNATSError(err))
	}
	return m.Data, nil
}

// Flush implements [Transport] with a PING/PONG round trip.
func (t *NATSTransport) Flush(ctx context.Context) error {
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	if err := t.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("bus: flush: %w", mapNATSError(err))
	}
	return nil
}

type natsSub struct{ s *nats.Subscription }

func (s natsSub) Unsubscribe() error {
	if err := s.s.Unsubscribe(); err != nil {
		return fmt.Errorf("bus: unsubscribe %s: %w", s.s.Subject, mapNATSError(err))
	}
	return nil
}

func (s natsSub) Dropped() int {
	n, err := s.s.Dropped()
	if err != nil {
		return 0
	}
	return n
}

// mapNATSError adds the bus sentinel matching a nats.go error, keeping the
// original in the chain.
func mapNATSError(err error) error {
	var sentinel error
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		sentinel = ErrNoResponders
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		sentinel = ErrTimeout
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrNoServers),
		errors.Is(err, nats.ErrDisconnected):
		sentinel = ErrDisconnected
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrBadSubscription),
		errors.Is(err, nats.ErrConnectionDraining):
		sentinel = ErrClosed
	case errors.Is(err, nats.ErrMaxPayload):
		sentinel = ErrPayloadTooLarge
	default:
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}
