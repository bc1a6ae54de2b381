package bus

import "github.com/nats-io/nats.go"

// connectedURL is the server a connection's log lines name. An in-process connection to the
// embedded server has no URL of its own (nats.go reports its default, nats://127.0.0.1:4222,
// which is some other server's address), so it is named by the embedded server's client URL:
// what other replicas would dial to reach it.
func connectedURL(cfg ConnConfig, nc *nats.Conn) string {
	if cfg.Embedded == nil {
		return nc.ConnectedUrlRedacted()
	}
	if u := cfg.Embedded.ClientURL(); u != "" {
		return "in-process " + u
	}
	return "in-process (no client port)"
}
