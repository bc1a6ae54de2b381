// Command kvselect runs the KV-cache-aware worker selector: Dynamo's standalone selection-service
// HTTP API, the AIBrix external-routing decision endpoint, KV-event ingestion over ZeroMQ and
// replica synchronisation over NATS (an embedded server unless --nats-url is given).
//
// Usage:
//
//	kvselect --port 8092                      # single node, embedded NATS
//	kvselect aibrix-check --url URL           # AIBrix conformance checker
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natsembed"
	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/http/api"
	"github.com/kvselect/kvselect/recovery"
)

func main() {
	if len(os.Args) > 1 {
		if sub, ok := subcommands[os.Args[1]]; ok {
			os.Exit(sub(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "kvselect:", err)
		os.Exit(1)
	}
}

// subcommands maps a first argument to a tool that shares the binary.
var subcommands = map[string]func(args []string, stdout, stderr io.Writer) int{}

// run starts the service and blocks until SIGINT/SIGTERM.
func run(args []string, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	bv := readBuildVersion()
	if o.showVersion {
		fmt.Println(bv)
		return nil
	}
	if err := checkStartup(o); err != nil {
		return err
	}
	log, err := newLogger(o, stderr)
	if err != nil {
		return err
	}
	cfg, err := core.ConfigFromEnvLogged(os.LookupEnv, log)
	if err != nil {
		return err
	}
	o.applyFlags(&cfg)
	if err := cfg.Validate(); err != nil {
		return err
	}
	replicaID := o.replicaID
	if replicaID == "" {
		host, _ := os.Hostname()
		replicaID = "tcp://" + net.JoinHostPort(host, strconv.Itoa(o.syncPort()))
	}

	// The bus: embedded single-node (or clustered) server unless --nats-url names one.
	var emb *natsembed.Server
	// Every reconnect schedules a republish of this replica's live bookings (anti-entropy:
	// events published during the outage were lost); see core/replication_resync.go.
	resync := &core.ResyncTrigger{}
	connCfg := bus.ConnConfig{
		Name: "kvselect/" + replicaID, URLs: o.natsURL, User: o.natsUser, Password: o.natsPassword,
		Token: o.natsToken, CredsFile: o.natsCreds, TLSCA: o.natsTLSCA, TLSCert: o.natsTLSCert, TLSKey: o.natsTLSKey,
		NoEcho: true, Logger: log, OnReconnect: resync.Fire,
	}
	if o.natsURL == "" {
		eo := natsembed.Options{ListenAddr: o.natsListen, Logger: log}
		if o.natsClusterListen != "" {
			eo.ClusterName, eo.ClusterListen, eo.ClusterRoutes = o.natsClusterName, o.natsClusterListen, splitList(o.natsClusterRoutes)
		}
		if err := applyNATSSecurity(o, replicaID, &connCfg, &eo); err != nil {
			return err
		}
		emb, err = natsembed.Start(eo)
		if err != nil {
			return fmt.Errorf("embedded NATS: %w", err)
		}
		defer func() { _ = emb.Shutdown() }()
		connCfg.Embedded = emb
		if u := emb.MonitorURL(); u != "" {
			log.Info("embedded NATS monitoring", "url", u)
		}
	} else if err := applyNATSSecurity(o, replicaID, &connCfg, nil); err != nil {
		return err
	}
	nc, err := bus.Connect(connCfg)
	if err != nil {
		return fmt.Errorf("NATS: %w", err)
	}
	defer nc.Close()
	if o.natsURL != "" {
		reportUnreachableNATS(log, nc, o.natsURL)
	}

	svc, err := core.New(core.Config{Engine: cfg, ReplicaID: replicaID, Logger: log, SweepInterval: o.sweepInterval, MaxKVListeners: o.limits.maxListeners})
	if err != nil {
		return err
	}
	aliases := localAliases(replicaID, o.syncPort())
	log.Info("replica sync identity: peers may register this replica under any of these", "replica_id", replicaID, "aliases", aliases)
	br, err := svc.EnableReplication(core.ReplicationConfig{
		Cluster: o.cluster, ReplicaID: replicaID, Aliases: aliases, HTTPAddr: advertisedHTTP(o),
		Peers: splitList(o.replicaSyncPeers), DiscoverPeers: o.discoverPeers, Resync: resync,
		DeadAfter: o.nats.peerDeadAfter, LegacyV1: o.legacyV1(), MaxMembers: o.nats.maxMembers,
	}, nc)
	if err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	defer func() { _ = br.Close() }()
	// Startup order (the seed's): listeners buffer, the index is recovered and submitted, only
	// then may listeners apply; this replica serves snapshots once its own recovery is done. The
	// HTTP port and signal handling come first, so that liveness answers and /ready reports 503
	// while a large index is recovered, and a SIGTERM during recovery still shuts down cleanly.
	svc.ExpectRecovery()
	svc.EnableKVEvents()
	defer func() { _ = svc.Close() }()

	ab, err := aibrixHandler(o, svc, log)
	if err != nil {
		return fmt.Errorf("aibrix: %w", err)
	}
	opsCtx, opsStop := context.WithCancel(context.Background())
	defer opsStop()
	auth, err := setupAuth(opsCtx, o, log)
	if err != nil {
		return err
	}
	warnExposed(o, log)
	if err := watchWorkersFile(opsCtx, o, svc); err != nil {
		return err
	}
	metrics := api.NewMetrics(svc)
	metrics.RegisterBuildInfo(bv.Version, bv.GoVersion, bv.Revision)
	metrics.WatchNATS(nc)
	if auth != nil {
		metrics.WatchAuth(auth)
	}
	handler := api.New(svc, api.Options{Logger: log, Metrics: metrics, AIBrix: metrics.InstrumentAIBrix(ab), AIBrixPath: o.aibrixPath,
		Auth: auth, ReplicaID: replicaID})
	drain := &drainState{svc: svc}
	// Deadlines, the connection cap and the body-memory budget (--http-*, README "Limits").
	guard := api.NewGuard(o.limits.http, log)
	metrics.MustRegister(guard)
	srv := guard.Server(net.JoinHostPort(o.host, strconv.Itoa(o.port)), drain.wrap(handler))
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return err
	}
	ln = guard.Listener(ln)
	log.Info("kvselect listening", "addr", ln.Addr().String(), "version", bv.Version, "replica_id", replicaID, "embedded_nats", emb != nil,
		"use_kv_events", cfg.UseKVEvents, "selection_policy", cfg.Policy, "tls", o.tlsCert != "", "auth", o.authTokenFile != "")
	if emb != nil {
		logEmbeddedURLs(log, emb)
	}
	errc := make(chan error, 1)
	go func() { errc <- serve(o, srv, ln) }()
	// The first SIGINT or SIGTERM cancels ctx (ending a recovery in progress) and starts the
	// shutdown; signal.Stop then restores the default action, so a second signal kills.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
	caught := make(chan os.Signal, 1)
	go func() {
		select {
		case sig := <-sigc:
			caught <- sig
			cancel()
		case <-ctx.Done():
		}
	}()

	if err := recoverIndex(ctx, o, svc, nc.MaxPayload(), emb != nil && o.natsClusterListen == ""); err != nil {
		return err
	}
	// A signal that ended recovery came before this replica was ever ready: nobody routes to it,
	// so there is nothing to drain.
	signalledEarly := ctx.Err() != nil
	svc.OpenGate()
	if err := svc.ServeSnapshots(recovery.ServerOptions{}); err != nil {
		return fmt.Errorf("snapshot serving: %w", err)
	}
	svc.Start()

	var sig os.Signal
	select {
	case sig = <-caught:
	case err := <-errc:
		return err
	}
	signal.Stop(sigc)
	grace := o.shutdownGrace
	if sig == syscall.SIGINT || signalledEarly {
		grace = 0
	}
	log.Info("shutting down", "signal", sig.String())
	return drain.shutdown(log, srv, grace, o.shutdownTimeout, errc)
}

// recoverIndex runs startup index recovery (--indexer-peers over HTTP, then live replicas over
// NATS per --nats-recovery). A replica on a private embedded server cannot have live peers, so it
// does not wait to discover any. Recovery failures are logged by the service; only a bad flag is
// an error.
func recoverIndex(ctx context.Context, o *options, svc *core.Service, maxPayload int64, alone bool) error {
	mode, err := core.ParseNATSRecoveryMode(o.natsRecovery)
	if err != nil {
		return err
	}
	wait := o.recoveryDiscovery
	if wait < 0 {
		wait = 1500 * time.Millisecond
		if alone {
			wait = 0
		}
	}
	svc.Recover(ctx, core.RecoveryConfig{
		HTTPPeers: splitList(o.indexerPeers), NATS: mode, MaxChunk: recovery.ChunkLimit(maxPayload), DiscoveryWait: wait,
	})
	return nil
}

// advertisedHTTP is the HTTP base URL announced to peers in heartbeats.
func advertisedHTTP(o *options) string {
	if o.advertiseHTTP != "" {
		return o.advertiseHTTP
	}
	host := o.host
	if host == "0.0.0.0" || host == "::" || host == "" {
		host, _ = os.Hostname()
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(o.port))
}

// newLogger builds the process logger from --log-level and --log-format.
func newLogger(o *options, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	hopts := &slog.HandlerOptions{Level: lvl}
	switch o.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", o.logFormat)
}
