package kvlisten

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// Private transport schemes registered with go-zeromq. They behave exactly
// like tcp:// and ipc:// except that a dialled connection is closed as soon
// as the owning socket's context ends (see boundTransport), and that its reads
// are checked against the message size limit (see frameGuard).
const (
	schemeTCP = "kvlisten-tcp"
	schemeIPC = "kvlisten-ipc"
)

var (
	registerOnce sync.Once
	registerErr  error
)

// registerTransports registers the private schemes once per process.
// go-zeromq's registry is global; the scheme names are unique to this
// package, so registration fails only if something else took them.
func registerTransports() error {
	registerOnce.Do(func() {
		registerErr = errors.Join(
			zmq4.RegisterTransport(schemeTCP, boundTransport{inner: transport.New("tcp")}),
			zmq4.RegisterTransport(schemeIPC, boundTransport{inner: transport.New("unix")}),
		)
	})
	return registerErr
}

// boundTransport wraps a net transport so that a dialled connection does not
// outlive the context it was dialled with. go-zeromq passes the socket's
// own context to Dial, and performs the ZMTP handshake on the raw connection
// without any deadline and without tracking it; a peer that accepts TCP but
// never speaks ZMTP would otherwise block Dial (and therefore Close) forever.
type boundTransport struct {
	inner transport.Transport
}

// Dial connects, arranges for the connection to be closed when ctx ends, and
// wraps it in a frameGuard when ctx carries a message size limit.
// The AfterFunc registration is released by the context itself when it is
// cancelled, which always happens when the socket is closed.
func (t boundTransport) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := t.inner.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, func() { _ = c.Close() })
	return guard(ctx, c), nil
}

// Listen is delegated unchanged (kvlisten only dials).
func (t boundTransport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	return t.inner.Listen(ctx, addr)
}

// Addr is delegated unchanged.
func (t boundTransport) Addr(ep string) (string, error) { return t.inner.Addr(ep) }

// dialEndpoint maps a public endpoint onto the private scheme that dials it.
// inproc:// is left alone (in-process, nothing can hang).
func dialEndpoint(ep string) string {
	switch {
	case strings.HasPrefix(ep, "tcp://"):
		return schemeTCP + ep[len("tcp"):]
	case strings.HasPrefix(ep, "ipc://"):
		return schemeIPC + ep[len("ipc"):]
	}
	return ep
}

// zsock is a go-zeromq socket plus the cancel function of the context it
// was created with. The creator owns it and must call closeAndDrain exactly
// once.
type zsock struct {
	zmq4.Socket
	cancel context.CancelFunc
}

// dialSocket creates a socket with newSock under a child of ctx, applies
// setup (e.g. subscriptions) and dials ep once. The whole dial, TCP connect
// plus ZMTP handshake, is bounded by timeout: a watchdog cancels the socket
// context, which aborts the connect or, through boundTransport, the
// handshake. Every connection's inbound messages are limited to maxMessage
// bytes (0: no limit). On failure the socket is already closed. Errors wrap
// ErrDial.
func dialSocket(ctx context.Context, newSock func(context.Context, ...zmq4.Option) zmq4.Socket,
	ep string, timeout time.Duration, maxMessage int, logger *slog.Logger, setup func(zmq4.Socket) error) (*zsock, error) {
	sctx, cancel := context.WithCancel(withMaxMessage(ctx, maxMessage))
	s := &zsock{
		Socket: newSock(sctx,
			zmq4.WithDialerMaxRetries(0), // kvlisten does its own retries
			zmq4.WithDialerTimeout(timeout),
			zmq4.WithTimeout(timeout), // bounds sends (subscriptions, replay request)
			zmq4.WithLogger(slog.NewLogLogger(logger.Handler(), slog.LevelDebug)),
		),
		cancel: cancel,
	}
	if setup != nil {
		if err := setup(s.Socket); err != nil {
			s.closeAndDrain()
			return nil, fmt.Errorf("%w: %s: %w", ErrDial, ep, err)
		}
	}
	watchdog := time.AfterFunc(timeout, cancel)
	err := s.Dial(dialEndpoint(ep))
	fired := !watchdog.Stop()
	if err == nil && (fired || sctx.Err() != nil) {
		err = context.DeadlineExceeded
	}
	if err != nil {
		s.closeAndDrain()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrDial, ep, ctx.Err())
		}
		if fired {
			return nil, fmt.Errorf("%w: %s: no ZMTP handshake within %v: %w", ErrDial, ep, timeout, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrDial, ep, err)
	}
	return s, nil
}

// drainMisses is how many consecutive empty Recv calls closeAndDrain needs
// before it stops. See closeAndDrain.
const drainMisses = 16

// closeAndDrain closes the socket and empties go-zeromq's receive queue.
//
// Why: each connection has a reader goroutine that pushes into a queue of
// capacity 10 without watching the context while blocked; if the queue is
// full when the socket closes, that goroutine would leak. After Close, Recv
// picks at random between the cancelled context and a queued message, so we
// call it until drainMisses consecutive calls return the context error (the
// chance of stopping while the queue is still full is 2^-16), with a hard cap
// on iterations. Recv never blocks once the context is cancelled.
func (s *zsock) closeAndDrain() {
	s.cancel()
	_ = s.Close()
	for i, misses := 0, 0; misses < drainMisses && i < 1024; i++ {
		_, err := s.Recv()
		if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			misses++
			continue
		}
		misses = 0
	}
}
