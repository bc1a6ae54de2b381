package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

// options is the parsed command line.
type options struct {
	host string
	port int

	// Dynamo-compatible flags (dynamo-selector-spec §1.1).
	threads                  int
	indexerPeers             string
	replicaSyncPort          int
	replicaSyncPeers         string
	sessionAffinityTTLSecs   float64
	sessionAffinityMode      string
	selectionCacheTTLSecs    float64
	selectionCacheMaxEntries int
	selectionCacheMaxBytes   int64
	assumeKVReuse            bool
	noAssumeKVReuse          bool
	trackingHash             string
	trackingKeyFile          string
	trackingKeyID            string

	// kvselect's own flags.
	replicaID         string
	advertiseHTTP     string
	cluster           string
	natsURL           string
	natsUser          string
	natsPassword      string
	natsToken         string
	natsCreds         string
	natsTLSCA         string
	natsTLSCert       string
	natsTLSKey        string
	natsListen        string
	natsClusterName   string
	natsClusterListen string
	natsClusterRoutes string
	discoverPeers     bool
	aibrixPath        string
	aibrixTokenFile   string
	aibrixPolicyFile  string
	selectionPolicy   string
	logLevel          string
	logFormat         string
	sweepInterval     time.Duration
	natsRecovery      string        // startup index recovery over NATS: auto, off, force
	opsOptions                      // operator flags (flags_ops.go)
	recoveryDiscovery time.Duration // how long NATS recovery waits for a first live replica

	nats            natsOptions   // NATS security and bus robustness (natsflags.go)
	showVersion     bool          // --version: print the build and exit
	shutdownGrace   time.Duration // SIGTERM: how long /ready answers 503 before the listener closes
	shutdownTimeout time.Duration // SIGTERM: how long in-flight requests may take after that

	limits limitOptions // --http-* and table limits (limits_flags.go)
}

// parseFlags parses args (without the program name).
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("kvselect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.host, "host", "0.0.0.0", "HTTP bind address")
	fs.IntVar(&o.port, "port", 8092, "HTTP port")
	fs.IntVar(&o.threads, "threads", 4, "accepted for Dynamo compatibility (event ingestion uses one goroutine per listener)")
	fs.StringVar(&o.indexerPeers, "indexer-peers", "", "comma-separated HTTP base URLs to recover the KV index from at startup (GET <url>/dump)")
	fs.IntVar(&o.replicaSyncPort, "replica-sync-port", 0, "Dynamo compatibility: when set and --replica-id is not, the replica id becomes tcp://<host>:<port>")
	fs.StringVar(&o.replicaSyncPeers, "replica-sync-peers", "", "comma-separated replica ids whose lifecycle events this replica applies")
	fs.Func("session-affinity-ttl-secs", "session stickiness idle TTL, whole seconds in 1..31536000 (default: off)", func(v string) error {
		secs, err := parseAffinityTTL(v)
		o.sessionAffinityTTLSecs = float64(secs)
		return err
	})
	fs.StringVar(&o.sessionAffinityMode, "session-affinity-mode", envOr("DYN_ROUTER_SESSION_AFFINITY_MODE", engine.SessionAffinityHard),
		"hard (a booking may not move a live session off its bound worker) or soft (the session rebinds to where it ran); env DYN_ROUTER_SESSION_AFFINITY_MODE")
	fs.Float64Var(&o.selectionCacheTTLSecs, "selection-cache-ttl-secs", 120, "lifetime of an unclaimed pending selection")
	fs.IntVar(&o.selectionCacheMaxEntries, "selection-cache-max-entries", 4096, "maximum resident pending selections")
	fs.Int64Var(&o.selectionCacheMaxBytes, "selection-cache-max-bytes", 256<<20, "approximate byte budget of pending selections")
	fs.BoolVar(&o.assumeKVReuse, "router-assume-kv-reuse", false, "override router_assume_kv_reuse to true")
	fs.BoolVar(&o.noAssumeKVReuse, "no-router-assume-kv-reuse", false, "override router_assume_kv_reuse to false")
	fs.StringVar(&o.trackingHash, "router-tracking-hash", "", "public-xxh3-v1 (default) or keyed-xxh3-v1")
	fs.StringVar(&o.trackingKeyFile, "router-tracking-key-file", "", "path to the 32-byte provider key (keyed-xxh3-v1)")
	fs.StringVar(&o.trackingKeyID, "router-tracking-key-id", "", "provider key epoch id (keyed-xxh3-v1)")

	fs.StringVar(&o.replicaID, "replica-id", "", "this replica's id on the bus (default: tcp://<hostname>:<port>)")
	fs.StringVar(&o.advertiseHTTP, "advertise-http", "", "HTTP base URL peers use to reach this replica, announced in heartbeats (default http://<hostname>:<port>)")
	fs.StringVar(&o.cluster, "cluster", "default", "selector cluster name: the NATS subject namespace shared by replicas")
	fs.StringVar(&o.natsURL, "nats-url", "", "external NATS servers (comma-separated); empty runs an embedded server")
	fs.StringVar(&o.natsUser, "nats-user", "", "NATS user")
	fs.StringVar(&o.natsPassword, "nats-password", "", "NATS password")
	fs.StringVar(&o.natsToken, "nats-token", "", "NATS token")
	fs.StringVar(&o.natsCreds, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&o.natsTLSCA, "nats-tls-ca", "", "CA file to verify NATS servers")
	fs.StringVar(&o.natsTLSCert, "nats-tls-cert", "", "client certificate for NATS")
	fs.StringVar(&o.natsTLSKey, "nats-tls-key", "", "client key for NATS")
	fs.StringVar(&o.natsListen, "nats-listen", "", "embedded NATS: host:port for other replicas to connect to (default: no client port)")
	fs.StringVar(&o.natsClusterName, "nats-cluster-name", "kvselect", "embedded NATS cluster name")
	fs.StringVar(&o.natsClusterListen, "nats-cluster-listen", "", "embedded NATS: host:port for cluster routes")
	fs.StringVar(&o.natsClusterRoutes, "nats-cluster-routes", "", "embedded NATS: comma-separated seed routes nats://host:port")
	fs.BoolVar(&o.discoverPeers, "discover-peers", false, "treat every live replica seen on the bus as a peer")
	fs.StringVar(&o.aibrixPath, "aibrix-path", "/v1alpha1/select", "path of the AIBrix external-routing decision endpoint")
	fs.StringVar(&o.aibrixTokenFile, "aibrix-auth-token-file", "", "bearer tokens accepted by the AIBrix endpoint (one per line)")
	fs.StringVar(&o.aibrixPolicyFile, "aibrix-policy-file", "", "AIBrix operator policy (YAML or JSON)")
	fs.StringVar(&o.selectionPolicy, "selection-policy", envOr("KVSELECT_SELECTION_POLICY", "kvselect"),
		"cost function: kvselect (default; estimated time to first token at each rank's learned speed, plus the work and cache a miss costs others) or dynamo (Dynamo's formula, exactly)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json")
	fs.DurationVar(&o.sweepInterval, "sweep-interval", 10*time.Second, "how often expired bookings are reclaimed")
	fs.StringVar(&o.natsRecovery, "nats-recovery", "auto", "startup index recovery from live replicas over NATS: auto (when --indexer-peers is empty), off, or force (also after HTTP peers failed)")
	fs.DurationVar(&o.recoveryDiscovery, "recovery-discovery-wait", -1, "how long NATS recovery waits to hear a first live replica when none is known (-1: 1.5 s with --nats-url or embedded clustering, 0 otherwise)")
	// NATS security and bus robustness (natsflags.go, README "Bus authentication").
	fs.StringVar(&o.nats.authFile, "nats-auth-file", "", "NATS auth file (YAML/JSON: secret and/or replicas' public nkeys): turns on authentication and per-replica permissions on the embedded server; with a secret, this replica authenticates as user <replica id> with the derived password")
	fs.StringVar(&o.nats.nkeySeed, "nats-nkey-seed", "", "file holding this replica's NATS user nkey seed (SU...), to authenticate with an nkey")
	fs.IntVar(&o.nats.httpPort, "nats-http-port", 0, "embedded NATS: monitoring port (/varz, /connz, /routez) on the client port's host, 127.0.0.1 without one (0: none)")
	fs.StringVar(&o.nats.busV1, "bus-v1", "auto", "unauthenticated v1 bus subjects: on (publish v1 copies and accept v1 from replicas not heard on v2: mixed-version rollout), off, or auto (on unless NATS authentication is configured)")
	fs.DurationVar(&o.nats.peerDeadAfter, "peer-dead-after", 0, "heartbeat silence after which a peer is dead and its mirrored bookings are released (0: 3 heartbeat periods, 3 s)")
	fs.IntVar(&o.nats.maxMembers, "bus-max-members", 1024, "most live replicas the members table holds; heartbeats of further ids are dropped and counted")
	fs.BoolVar(&o.showVersion, "version", false, "print the version, Go version and VCS revision, then exit")
	fs.DurationVar(&o.shutdownGrace, "shutdown-grace", 5*time.Second, "on SIGTERM, how long /ready answers 503 while requests are still served, before the listener closes (0: close at once)")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 15*time.Second, "on SIGTERM, how long in-flight requests may take to finish once the listener is closed")
	o.opsOptions.register(fs)
	registerLimitFlags(fs, &o.limits)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	applyNATSEnv(fs, o, os.Getenv)
	if err := o.opsOptions.validate(); err != nil {
		return nil, err
	}
	if err := o.nats.validate(o); err != nil {
		return nil, err
	}
	if err := o.limits.validate(); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.assumeKVReuse && o.noAssumeKVReuse {
		return nil, fmt.Errorf("--router-assume-kv-reuse and --no-router-assume-kv-reuse are mutually exclusive")
	}
	if o.natsURL != "" && (o.natsListen != "" || o.natsClusterListen != "" || o.natsClusterRoutes != "") {
		return nil, fmt.Errorf("--nats-listen and --nats-cluster-* configure the embedded NATS server; they cannot be combined with --nats-url")
	}
	if o.natsClusterRoutes != "" && o.natsClusterListen == "" {
		return nil, fmt.Errorf("--nats-cluster-routes requires --nats-cluster-listen")
	}
	if o.natsURL == "" && (o.natsUser != "" || o.natsPassword != "" || o.natsToken != "" || o.natsCreds != "") {
		return nil, fmt.Errorf("--nats-user, --nats-password, --nats-token and --nats-creds apply to --nats-url; the embedded server authenticates with --nats-auth-file")
	}
	if err := o.checkDynamoRules(fs); err != nil {
		return nil, err
	}
	return o, nil
}

// config builds the service configuration: DYN_ROUTER_* (core.ConfigFromEnv, warning on log
// about values it ignores), then the flags over it, validated as a whole.
func (o *options) config(log *slog.Logger) (core.Config, error) {
	cfg, err := core.ConfigFromEnv(os.LookupEnv, log)
	if err != nil {
		return cfg, err
	}
	o.applyFlags(&cfg)
	cfg.Logger = log
	return cfg, cfg.Validate()
}

// applyFlags overlays the flags on a service configuration: the Dynamo CLI overrides on the
// environment's router configuration, and kvselect's own service settings.
func (o *options) applyFlags(cfg *core.Config) {
	cfg.ReplicaID = o.resolvedReplicaID()
	cfg.SweepInterval = o.sweepInterval
	cfg.MaxKVListeners = o.limits.maxListeners
	cfg.Replication = core.ReplicationConfig{Bus: bus.Config{
		Cluster: o.cluster, Aliases: localAliases(cfg.ReplicaID, o.syncPort()), HTTPAddr: advertisedHTTP(o),
		Peers: splitList(o.replicaSyncPeers), DiscoverPeers: o.discoverPeers,
		DeadAfter: o.nats.peerDeadAfter, LegacyV1: o.legacyV1(), MaxMembers: o.nats.maxMembers,
	}}
	// A replica on a private embedded server cannot have live peers, so by default it does not
	// wait to discover any.
	wait := o.recoveryDiscovery
	if wait < 0 {
		wait = 1500 * time.Millisecond
		if o.natsURL == "" && o.natsClusterListen == "" {
			wait = 0
		}
	}
	cfg.Recovery = core.RecoveryConfig{Enabled: true, HTTPPeers: splitList(o.indexerPeers),
		NATS: core.NATSRecoveryMode(o.natsRecovery), DiscoveryWait: wait}
	c := &cfg.Engine
	c.Policy = o.selectionPolicy
	if o.assumeKVReuse {
		c.AssumeKVReuse = true
	}
	if o.noAssumeKVReuse {
		c.AssumeKVReuse = false
	}
	if o.trackingHash != "" {
		c.TrackingHash = o.trackingHash
	}
	if o.trackingKeyFile != "" {
		c.TrackingKeyFile = o.trackingKeyFile
	}
	if o.trackingKeyID != "" {
		c.TrackingKeyID = o.trackingKeyID
	}
	c.SelectionCacheTTL = time.Duration(o.selectionCacheTTLSecs * float64(time.Second))
	c.SelectionCacheMaxEntries = o.selectionCacheMaxEntries
	c.SelectionCacheMaxBytes = o.selectionCacheMaxBytes
	c.SessionAffinityTTL = time.Duration(o.sessionAffinityTTLSecs * float64(time.Second))
	c.Limits = o.limits.engine
	c.SessionAffinityMode = o.sessionAffinityMode
}

// resolvedReplicaID is --replica-id, or tcp://<hostname>:<sync port>.
func (o *options) resolvedReplicaID() string {
	if o.replicaID != "" {
		return o.replicaID
	}
	host, _ := os.Hostname()
	return "tcp://" + net.JoinHostPort(host, strconv.Itoa(o.syncPort()))
}

// envOr returns the environment variable's value, or def when unset or empty.
func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
