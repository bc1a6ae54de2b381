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

	"github.com/nats-io/nats.go"

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
	cfg, err := o.config(log)
	if err != nil {
		return err
	}
	// Every reconnect schedules a republish of this replica's live bookings (anti-entropy:
	// events published during the outage were lost); see core/replication_resync.go.
	cfg.Replication.Resync = &core.ResyncTrigger{}
	nc, emb, err := connectBus(o, cfg.ReplicaID, log, cfg.Replication.Resync.Fire)
	if emb != nil {
		defer func() { _ = emb.Shutdown() }()
	}
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg.Recovery.MaxChunk = recovery.ChunkLimit(nc.MaxPayload())

	log.Info("replica sync identity: peers may register this replica under any of these", "replica_id", cfg.ReplicaID, "aliases", cfg.Replication.Bus.Aliases)
	svc, err := core.New(cfg, core.WithTransport(bus.NewNATSTransport(nc)))
	if err != nil {
		return err
	}
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
		Auth: auth, ReplicaID: cfg.ReplicaID})
	// Deadlines, the connection cap and the body-memory budget (--http-*, README "Limits").
	guard := api.NewGuard(o.limits.http, log)
	metrics.MustRegister(guard)
	// The service runs (Run: KV events, recovery, gate, snapshot serving, sweep) until the
	// drain closes it; stopping runCtx and waiting for Run is the drain's "close the service".
	runCtx, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	runErr := make(chan error, 1)
	drain := &drainState{svc: svc, close: func() error { stopRun(); return <-runErr }}
	srv := guard.Server(net.JoinHostPort(o.host, strconv.Itoa(o.port)), drain.wrap(handler))
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return err
	}
	ln = guard.Listener(ln)
	log.Info("kvselect listening", "addr", ln.Addr().String(), "version", bv.Version, "replica_id", cfg.ReplicaID, "embedded_nats", emb != nil,
		"use_kv_events", cfg.Engine.UseKVEvents, "selection_policy", cfg.Engine.Policy, "tls", o.tlsCert != "", "auth", o.authTokenFile != "")
	if emb != nil {
		logEmbeddedURLs(log, emb)
	}
	// The HTTP port and signal handling come before the startup order, so that liveness
	// answers and /ready reports 503 while a large index is recovered, and a SIGTERM during
	// recovery still shuts down cleanly. signal.Stop after the first signal restores the
	// default action, so a second signal kills.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
	errc := make(chan error, 1)
	go func() { errc <- serve(o, srv, ln) }()
	go func() { runErr <- svc.Run(runCtx) }()

	var sig os.Signal
	select {
	case sig = <-sigc:
	case err := <-errc:
		return err
	case err := <-runErr: // startup failed (Run has closed the service)
		return err
	}
	signal.Stop(sigc)
	grace := o.shutdownGrace
	select {
	case <-svc.Started():
	default:
		// A signal before startup finished ends the recovery in progress; this replica was
		// never ready, nobody routes to it, so there is nothing to drain.
		stopRun()
		grace = 0
	}
	if sig == syscall.SIGINT {
		grace = 0
	}
	log.Info("shutting down", "signal", sig.String())
	return drain.shutdown(log, srv, grace, o.shutdownTimeout, errc)
}

// connectBus connects to the replicas' bus: the embedded single-node (or clustered) server
// unless --nats-url names one. onReconnect runs after every reconnect. A non-nil emb must be
// shut down by the caller, also when err is not nil.
func connectBus(o *options, replicaID string, log *slog.Logger, onReconnect func()) (nc *nats.Conn, emb *natsembed.Server, err error) {
	connCfg := bus.ConnConfig{
		Name: "kvselect/" + replicaID, URLs: o.natsURL, User: o.natsUser, Password: o.natsPassword,
		Token: o.natsToken, CredsFile: o.natsCreds, TLSCA: o.natsTLSCA, TLSCert: o.natsTLSCert, TLSKey: o.natsTLSKey,
		NoEcho: true, Logger: log, OnReconnect: onReconnect,
	}
	if o.natsURL == "" {
		eo := natsembed.Options{ListenAddr: o.natsListen, Logger: log}
		if o.natsClusterListen != "" {
			eo.ClusterName, eo.ClusterListen, eo.ClusterRoutes = o.natsClusterName, o.natsClusterListen, splitList(o.natsClusterRoutes)
		}
		if err := applyNATSSecurity(o, replicaID, &connCfg, &eo); err != nil {
			return nil, nil, err
		}
		if emb, err = natsembed.Start(eo); err != nil {
			return nil, nil, fmt.Errorf("embedded NATS: %w", err)
		}
		connCfg.Embedded = emb
		if u := emb.MonitorURL(); u != "" {
			log.Info("embedded NATS monitoring", "url", u)
		}
	} else if err := applyNATSSecurity(o, replicaID, &connCfg, nil); err != nil {
		return nil, nil, err
	}
	if nc, err = bus.Connect(connCfg); err != nil {
		return nil, emb, fmt.Errorf("NATS: %w", err)
	}
	if o.natsURL != "" {
		reportUnreachableNATS(log, nc, o.natsURL)
	}
	return nc, emb, nil
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
