package bus

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// InProcessServer is a NATS server in this process that a connection dials without a socket
// (bus/natsembed's Server). ClientURL is its client port's URL, "" when it has none; it only
// names the connection in logs.
type InProcessServer interface {
	nats.InProcessConnProvider
	ClientURL() string
}

// ConnConfig describes how a replica reaches NATS: an external server or
// cluster (URLs) or the embedded server in process (Embedded). Exactly one
// of the two must be set.
type ConnConfig struct {
	// Name identifies the connection in server monitoring, e.g.
	// "kvselect/"+replicaID.
	Name string
	// URLs is a comma-separated list of servers ("nats://a:4222,nats://b:4222").
	URLs string
	// Embedded connects in process to this server (no socket).
	Embedded InProcessServer

	// Authentication: at most one of user/password, token, creds file, nkey seed file.
	// For kvselect's embedded server (natsauth.go) a replica uses User = its replica id with
	// Password = ReplicaPassword(secret, id), or NkeySeedFile.
	User, Password string
	Token          string
	CredsFile      string
	NkeySeedFile   string // a file holding a user nkey seed (SU...)

	// TLS: a CA file to verify servers, and an optional client certificate.
	// Setting TLSCert requires TLSKey and vice versa.
	TLSCA, TLSCert, TLSKey string

	// NoEcho stops the server from sending this connection's own publishes
	// back to it. Receivers drop their own echoes regardless.
	NoEcho bool

	// Timings; zero values take the defaults noted.
	ConnectTimeout time.Duration // per attempt, default 2 s
	ReconnectWait  time.Duration // between attempts, default 1 s (+ up to 0.5 s jitter)
	PingInterval   time.Duration // default 10 s; with 3 missed pongs the connection is stale after ~40 s

	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// Stats, if non-nil, is incremented by the connection's handlers.
	Stats *ConnStats
	// OnReconnect runs after every successful reconnect (on nats.go's
	// shared callback goroutine: keep it short). It is the seam for
	// scheduling anti-entropy: events published meanwhile are lost.
	OnReconnect func()
}

// ConnStats counts connection events. All fields are updated atomically by
// nats.go callback goroutines; read them with Load or [ConnStats.Snapshot].
type ConnStats struct {
	Connects      atomic.Uint64 // first successful connects (RetryOnFailedConnect)
	Disconnects   atomic.Uint64
	Reconnects    atomic.Uint64
	Closed        atomic.Uint64
	AsyncErrors   atomic.Uint64 // errors reported to the ErrorHandler
	SlowConsumers atomic.Uint64 // of which slow-consumer episodes (messages dropped)
}

// ConnStatsSnapshot is a point-in-time copy of [ConnStats].
type ConnStatsSnapshot struct {
	Connects, Disconnects, Reconnects, Closed, AsyncErrors, SlowConsumers uint64
}

// Snapshot copies the counters.
func (s *ConnStats) Snapshot() ConnStatsSnapshot {
	return ConnStatsSnapshot{
		Connects: s.Connects.Load(), Disconnects: s.Disconnects.Load(), Reconnects: s.Reconnects.Load(),
		Closed: s.Closed.Load(), AsyncErrors: s.AsyncErrors.Load(), SlowConsumers: s.SlowConsumers.Load(),
	}
}

// ErrConnConfig is returned by Connect for inconsistent configuration.
var ErrConnConfig = errors.New("bus: invalid connection config")

const (
	defaultConnectTimeout = 2 * time.Second
	defaultReconnectWait  = time.Second
	defaultPingInterval   = 10 * time.Second
	maxPingsOutstanding   = 3
	reconnectJitter       = 500 * time.Millisecond
	reconnectJitterTLS    = time.Second
)

func (c ConnConfig) validate() error {
	switch {
	case c.Embedded != nil && c.URLs != "":
		return fmt.Errorf("%w: both URLs and Embedded set", ErrConnConfig)
	case c.Embedded == nil && strings.TrimSpace(c.URLs) == "":
		return fmt.Errorf("%w: neither URLs nor Embedded set", ErrConnConfig)
	}
	auth := 0
	if c.User != "" || c.Password != "" {
		auth++
	}
	if c.Token != "" {
		auth++
	}
	if c.CredsFile != "" {
		auth++
	}
	if c.NkeySeedFile != "" {
		auth++
	}
	if auth > 1 {
		return fmt.Errorf("%w: more than one of user/password, token, creds file, nkey seed", ErrConnConfig)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("%w: TLSCert and TLSKey go together", ErrConnConfig)
	}
	return nil
}

// Connect opens a connection tuned for a long-lived replica:
//
//   - reconnect forever (MaxReconnects(-1)), every ReconnectWait plus
//     jitter, and start even if no server is up yet (RetryOnFailedConnect:
//     the returned connection is then RECONNECTING and connects later);
//   - no reconnect buffer (ReconnectBufSize(-1)): while disconnected,
//     Publish fails at once instead of queueing stale events for replay;
//   - pings every PingInterval, stale after 3 unanswered;
//   - every connection event logged through Logger and counted in Stats.
//
// The caller owns the connection and must Close (or Drain) it.
func Connect(cfg ConnConfig) (*nats.Conn, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)).With("component", "nats-conn", "conn", cfg.Name)
	stats := cmp.Or(cfg.Stats, &ConnStats{})
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(orDefault(cfg.ReconnectWait, defaultReconnectWait)),
		nats.ReconnectJitter(reconnectJitter, reconnectJitterTLS),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectBufSize(-1), // -1 disables; 0 would mean the 8 MiB default
		nats.Timeout(orDefault(cfg.ConnectTimeout, defaultConnectTimeout)),
		nats.PingInterval(orDefault(cfg.PingInterval, defaultPingInterval)),
		nats.MaxPingsOutstanding(maxPingsOutstanding),
		nats.ConnectHandler(func(nc *nats.Conn) {
			stats.Connects.Add(1)
			log.Info("nats connected", "url", connectedURL(cfg, nc))
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			stats.Disconnects.Add(1)
			log.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			stats.Reconnects.Add(1)
			log.Info("nats reconnected", "url", connectedURL(cfg, nc))
			if cfg.OnReconnect != nil {
				cfg.OnReconnect()
			}
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			stats.Closed.Add(1)
			log.Info("nats connection closed", "err", nc.LastError())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			stats.AsyncErrors.Add(1)
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			if errors.Is(err, nats.ErrSlowConsumer) {
				stats.SlowConsumers.Add(1)
			}
			log.Warn("nats async error", "subject", subject, "err", err)
		}),
	}
	if cfg.NoEcho {
		opts = append(opts, nats.NoEcho())
	}
	switch {
	case cfg.User != "" || cfg.Password != "":
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	case cfg.Token != "":
		opts = append(opts, nats.Token(cfg.Token))
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.NkeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(cfg.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("%w: nkey seed: %w", ErrConnConfig, err)
		}
		opts = append(opts, o)
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	url := cfg.URLs
	if cfg.Embedded != nil {
		opts = append(opts, nats.InProcessServer(cfg.Embedded))
		url = ""
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect %q: %w", redactURLs(url), err)
	}
	return nc, nil
}

// redactURLs hides user info in URLs before they reach a log or error.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if at := strings.LastIndex(p, "@"); at >= 0 {
			if scheme := strings.Index(p, "://"); scheme >= 0 && scheme < at {
				parts[i] = p[:scheme+3] + "redacted@" + p[at+1:]
			}
		}
	}
	return strings.Join(parts, ",")
}

// orDefault returns v, or def when v is zero or negative (an unset option).
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
