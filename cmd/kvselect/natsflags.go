package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natsembed"
)

// NATS security and bus-robustness flags (README "Bus authentication"). Declared in flags.go
// (the deploy checks read the declarations there); validated and wired here.

// natsOptions are the parsed NATS security flags.
type natsOptions struct {
	authFile      string        // --nats-auth-file: shared secret and/or replica nkeys (embedded server; client password)
	nkeySeed      string        // --nats-nkey-seed: this replica's user nkey seed file
	httpPort      int           // --nats-http-port: embedded server monitoring port (0 none, -1 random)
	busV1         string        // --bus-v1: auto, on, off
	peerDeadAfter time.Duration // --peer-dead-after: heartbeat silence that releases a peer's bookings
	maxMembers    int           // --bus-max-members
}

// applyNATSEnv fills --nats-url and --nats-creds from NATS_URL and NATS_CREDS when the flags
// are not given (the nats CLI's variables). NATS_URL is ignored when an embedded-server flag
// is given (the embedded server is then what was asked for), NATS_CREDS without a NATS URL.
func applyNATSEnv(fs *flag.FlagSet, o *options, getenv func(string) string) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	embedded := set["nats-listen"] || set["nats-cluster-listen"] || set["nats-cluster-routes"] || set["nats-http-port"]
	if v := strings.TrimSpace(getenv("NATS_URL")); v != "" && !set["nats-url"] && !embedded {
		o.natsURL = v
	}
	if v := strings.TrimSpace(getenv("NATS_CREDS")); v != "" && !set["nats-creds"] && o.natsURL != "" {
		o.natsCreds = v
	}
}

// validate checks the NATS security flags on their own (--peer-dead-after and --bus-max-members
// are core.Config.Validate's).
func (n *natsOptions) validate(o *options) error {
	switch n.busV1 {
	case "auto", "on", "off":
	default:
		return fmt.Errorf("--bus-v1 must be auto, on or off, got %q", n.busV1)
	}
	if n.httpPort < -1 || n.httpPort > 65535 {
		return fmt.Errorf("--nats-http-port must be between -1 and 65535")
	}
	if n.httpPort != 0 && o.natsURL != "" {
		return fmt.Errorf("--nats-http-port configures the embedded NATS server; it cannot be combined with --nats-url")
	}
	if n.nkeySeed != "" && (o.natsUser != "" || o.natsPassword != "" || o.natsToken != "" || o.natsCreds != "") {
		return fmt.Errorf("--nats-nkey-seed cannot be combined with --nats-user, --nats-password, --nats-token or --nats-creds")
	}
	return nil
}

// usesAuth reports whether any NATS authentication is configured.
func (o *options) usesNATSAuth() bool {
	n := &o.nats
	return n.authFile != "" || n.nkeySeed != "" || o.natsCreds != "" || o.natsUser != "" || o.natsToken != ""
}

// legacyV1 resolves --bus-v1.
func (o *options) legacyV1() bool {
	switch o.nats.busV1 {
	case "on":
		return true
	case "off":
		return false
	}
	return !o.usesNATSAuth()
}

// applyNATSSecurity loads the auth file and sets this replica's client credentials and the
// embedded server's auth, TLS and monitoring options (eo is nil with --nats-url).
func applyNATSSecurity(o *options, replicaID string, cc *bus.ConnConfig, eo *natsembed.Options) error {
	n := &o.nats
	cc.NkeySeedFile = n.nkeySeed
	if n.nkeySeed != "" {
		if _, err := os.Stat(n.nkeySeed); err != nil {
			return fmt.Errorf("--nats-nkey-seed: %w", err)
		}
	}
	var af *bus.AuthFile
	if n.authFile != "" {
		var err error
		if af, err = bus.LoadAuthFile(n.authFile); err != nil {
			return fmt.Errorf("--nats-auth-file: %w", err)
		}
		clientAuth := cc.User != "" || cc.Password != "" || cc.Token != "" || cc.CredsFile != "" || cc.NkeySeedFile != ""
		if af.Secret != "" && !clientAuth {
			cc.User, cc.Password = replicaID, bus.ReplicaPassword(af.Secret, replicaID)
		}
	}
	if eo == nil {
		return nil
	}
	eo.Auth, eo.AuthCluster = af, o.cluster
	eo.TLSCert, eo.TLSKey, eo.TLSCA = o.natsTLSCert, o.natsTLSKey, o.natsTLSCA
	eo.HTTPPort = n.httpPort
	// The in-process client never uses TLS; the flags describe the server's ports here.
	cc.TLSCert, cc.TLSKey, cc.TLSCA = "", "", ""
	return nil
}
