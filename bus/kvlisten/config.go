package kvlisten

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// Defaults applied by Start to zero-valued Config fields.
const (
	DefaultMinBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff    = 5 * time.Second
	DefaultDialTimeout   = 2 * time.Second
	DefaultReplayTimeout = 5 * time.Second
	DefaultRestartWindow = 1024
	DefaultBufferBatches = 4096
	DefaultBufferBytes   = 32 << 20
	// DefaultMaxMessageBytes bounds one inbound ZMTP message. A vLLM or SGLang batch is a few
	// KiB; a step storing a million tokens' blocks with their token ids is about 5 MiB.
	DefaultMaxMessageBytes = 16 << 20
	// DefaultQueueLen bounds the hand-off between the receiver and the
	// processor goroutine; when it is full the receiver stops reading and
	// back-pressure reaches the engine's PUB high-water mark.
	DefaultQueueLen = 1024
	// DefaultQueueBytes bounds the payload bytes in that hand-off: without it a slow Handler
	// could let QueueLen maximum-size messages (16 GiB) pile up.
	DefaultQueueBytes = 64 << 20
)

// Handler consumes batches. Its methods are called from one goroutine per
// Listener, never concurrently, in sequence order.
type Handler interface {
	// Apply is called with each batch in sequence order. replayed is true
	// when the batch came from the engine's replay buffer rather than the
	// live stream. Returning an error marks the batch undecodable: the
	// watermark does not advance. The payload is not reused by the listener
	// and may be retained.
	Apply(seq uint64, payload []byte, replayed bool) error
	// Restarted is called before the first batch of a restarted publisher
	// is applied, with the watermark of the previous incarnation and the
	// sequence number that revealed the restart. The caller should drop
	// this rank's stale ownership.
	Restarted(prevWatermark, seq uint64)
}

// Config configures one Listener. Only Endpoint and Handler are required.
type Config struct {
	// Endpoint is the engine's PUB endpoint, dialled by a SUB socket:
	// tcp://host:port, tcp://[v6]:port, ipc://path or inproc://name.
	Endpoint string
	// ReplayEndpoint is the engine's ROUTER replay endpoint; empty disables
	// gap repair and restart probes.
	ReplayEndpoint string
	// Topic is the SUB prefix filter; empty subscribes to every topic.
	Topic string
	// Handler receives the batches. Required.
	Handler Handler
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Gate, when non-nil, holds back application until it is closed; batches
	// received meanwhile are buffered (bounded). nil means open.
	Gate <-chan struct{}
	// MinBackoff and MaxBackoff bound the exponential delay between dial
	// attempts; retries are unlimited.
	MinBackoff, MaxBackoff time.Duration
	// DialTimeout bounds one TCP connect plus ZMTP handshake.
	DialTimeout time.Duration
	// ReplayTimeout is the longest silence tolerated while reading a replay
	// (and the bound on dialling the replay endpoint).
	ReplayTimeout time.Duration
	// RestartWindow is the "near zero" bound of restart rule 2 (see the
	// package documentation).
	RestartWindow uint64
	// BufferBatches and BufferBytes bound the batches held while the gate
	// is closed.
	BufferBatches int
	BufferBytes   int
	// QueueLen is the capacity of the receiver-to-processor queue, and QueueBytes bounds the
	// payload bytes in it: a batch counts from when the receiver queues it until its Handler
	// call returns, or until it is moved into the gate buffer (bounded by BufferBytes) while
	// the gate is closed; one larger than QueueBytes counts as QueueBytes. The receiver stops
	// reading when either is reached.
	QueueLen   int
	QueueBytes int
	// MaxMessageBytes bounds an inbound ZMTP message (the sum of its frames) and a command
	// frame on every tcp:// and ipc:// connection the listener dials (libzmq's
	// ZMQ_MAXMSGSIZE). A peer that announces more is disconnected before anything is
	// allocated for it, and the listener redials (see frameguard.go).
	MaxMessageBytes int
}

// withDefaults returns a copy of c with zero fields replaced by defaults and
// checks what cannot be defaulted.
func (c Config) withDefaults() (Config, error) {
	if c.Handler == nil {
		return c, fmt.Errorf("%w: Handler is nil", ErrInvalidConfig)
	}
	if err := ValidateEndpoint(c.Endpoint); err != nil {
		return c, fmt.Errorf("%w: Endpoint: %w", ErrInvalidConfig, err)
	}
	if c.ReplayEndpoint != "" {
		if err := ValidateEndpoint(c.ReplayEndpoint); err != nil {
			return c, fmt.Errorf("%w: ReplayEndpoint: %w", ErrInvalidConfig, err)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setDur(&c.MinBackoff, DefaultMinBackoff)
	setDur(&c.MaxBackoff, DefaultMaxBackoff)
	setDur(&c.DialTimeout, DefaultDialTimeout)
	setDur(&c.ReplayTimeout, DefaultReplayTimeout)
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
	if c.RestartWindow == 0 {
		c.RestartWindow = DefaultRestartWindow
	}
	if c.BufferBatches <= 0 {
		c.BufferBatches = DefaultBufferBatches
	}
	if c.BufferBytes <= 0 {
		c.BufferBytes = DefaultBufferBytes
	}
	if c.QueueLen <= 0 {
		c.QueueLen = DefaultQueueLen
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return c, nil
}

// ValidateEndpoint checks a ZMQ endpoint with the rules Dynamo applies to
// kv-events and replay endpoints: scheme://address, schemes tcp, ipc and
// inproc; tcp needs host and a u16 port, IPv6 hosts in brackets. The wildcard
// host "*" is accepted. Errors wrap ErrInvalidEndpoint.
func ValidateEndpoint(ep string) error {
	scheme, addr, ok := strings.Cut(ep, "://")
	if !ok || scheme == "" {
		return fmt.Errorf("%w `%s`: missing scheme", ErrInvalidEndpoint, ep)
	}
	if addr == "" {
		return fmt.Errorf("%w `%s`: missing address", ErrInvalidEndpoint, ep)
	}
	switch scheme {
	case "ipc", "inproc":
		return nil
	case "tcp":
	default:
		return fmt.Errorf("%w `%s`: unsupported scheme `%s`", ErrInvalidEndpoint, ep, scheme)
	}
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return fmt.Errorf("%w `%s`: missing TCP port", ErrInvalidEndpoint, ep)
	}
	host, port := addr[:i], addr[i+1:]
	switch {
	case host == "":
		return fmt.Errorf("%w `%s`: missing TCP host", ErrInvalidEndpoint, ep)
	case strings.HasPrefix(host, "["):
		if !strings.HasSuffix(host, "]") || len(host) < 3 {
			return fmt.Errorf("%w `%s`: missing closing ]", ErrInvalidEndpoint, ep)
		}
		if net.ParseIP(host[1:len(host)-1]) == nil {
			return fmt.Errorf("%w `%s`: invalid IPv6 host", ErrInvalidEndpoint, ep)
		}
	case strings.Contains(host, ":"):
		return fmt.Errorf("%w `%s`: missing TCP port", ErrInvalidEndpoint, ep)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%w `%s`: invalid TCP port: %w", ErrInvalidEndpoint, ep, err)
	}
	return nil
}
