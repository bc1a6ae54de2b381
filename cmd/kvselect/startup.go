package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"
)

// checkStartup refuses process flag values that would otherwise fail late (after "kvselect
// listening"): a negative --shutdown-grace or --shutdown-timeout, and a --nats-url entry that is
// not a NATS URL. The service's own settings (--nats-recovery, --sweep-interval, ...) are
// refused by core.Config.Validate before anything starts.
func checkStartup(o *options) error {
	if o.shutdownGrace < 0 {
		return fmt.Errorf("--shutdown-grace must be 0 or more, got %v", o.shutdownGrace)
	}
	if o.shutdownTimeout <= 0 {
		return fmt.Errorf("--shutdown-timeout must be positive, got %v", o.shutdownTimeout)
	}
	for _, u := range splitList(o.natsURL) {
		if _, err := natsAddr(u); err != nil {
			return fmt.Errorf("--nats-url %q: %w", redactURL(u), err)
		}
	}
	return nil
}

// natsSchemes are the URL schemes the NATS client dials (nats.go); an entry without a scheme
// is host:port and means nats://.
var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

// natsAddr returns the host:port a --nats-url entry dials, or why it is not a NATS URL.
func natsAddr(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("not a URL: %w", err)
	}
	if !natsSchemes[strings.ToLower(u.Scheme)] {
		return "", fmt.Errorf("scheme %q is not a NATS scheme (nats://, tls://, ws:// or wss://)", u.Scheme)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("no host")
	}
	if u.Port() == "" {
		port := "4222"
		switch strings.ToLower(u.Scheme) {
		case "ws":
			port = "80"
		case "wss":
			port = "443"
		}
		return net.JoinHostPort(u.Hostname(), port), nil
	}
	return u.Host, nil
}

// redactURL drops a password from a URL for messages.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	return s
}

// natsConnected is the part of *nats.Conn reportUnreachableNATS reads.
type natsConnected interface{ IsConnected() bool }

// reportUnreachableNATS logs, once at startup, why the external NATS servers cannot be reached
// when the first connection attempt failed. The client keeps retrying in the background (the
// replica starts and serves alone meanwhile), so without this line an operator sees no error
// at all; the message carries each server's address and the dial error (for example
// "connect: connection refused").
func reportUnreachableNATS(log *slog.Logger, nc natsConnected, urls string) {
	if nc.IsConnected() {
		return
	}
	for _, u := range splitList(urls) {
		addr, err := natsAddr(u)
		if err != nil {
			continue // refused by checkStartup
		}
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			log.Error("NATS server unreachable; retrying in the background, replication and NATS recovery wait for it",
				"url", redactURL(u), "addr", addr, "err", err)
			continue
		}
		_ = c.Close()
		log.Warn("NATS server accepts TCP but the NATS connection is not up yet (TLS, authentication or protocol); retrying in the background",
			"url", redactURL(u), "addr", addr)
	}
}

// logEmbeddedURLs logs the embedded server's own client and cluster URLs (when it listens), so
// an operator starting a second embedded replica sees the address to give the next one
// (--nats-cluster-routes) and the client port (--nats-listen).
func logEmbeddedURLs(log *slog.Logger, emb interface {
	ClientURL() string
	ClusterURL() string
}) {
	if c, r := emb.ClientURL(), emb.ClusterURL(); c != "" || r != "" {
		log.Info("embedded NATS server", "client_url", c, "cluster_url", r)
	}
}
