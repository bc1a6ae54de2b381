package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/http/api"
	"github.com/kvselect/kvselect/internal/filewatch"
)

// setupAuth loads --auth-token-file (nil without it) and reloads it whenever the file changes,
// until ctx ends. A reload that fails keeps the previous tokens.
func setupAuth(ctx context.Context, o *options, log *slog.Logger) (*api.Auth, error) {
	if o.authTokenFile == "" {
		return nil, nil
	}
	scope, err := api.ParseAuthScope(o.authScope)
	if err != nil {
		return nil, err
	}
	a, err := api.NewAuth(o.authTokenFile, scope, log)
	if err != nil {
		return nil, fmt.Errorf("--auth-token-file: %w", err)
	}
	if _, err := filewatch.Watch(ctx, o.authTokenFile, 0, func() { _ = a.Reload() }, func(err error) {
		log.Warn("auth token file: watch error", "err", err)
	}); err != nil {
		log.Warn("auth token file: not watched for changes; restart to rotate tokens", "err", err)
	}
	return a, nil
}

// warnExposed warns when the HTTP port is reachable from other hosts without authentication.
func warnExposed(o *options, log *slog.Logger) {
	if o.authTokenFile != "" {
		return
	}
	host := o.host
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return
	}
	log.Warn("the HTTP API is served on a non-loopback address without authentication: anyone who can reach it can change the catalog and bookings; "+
		"set --auth-token-file, bind --host 127.0.0.1, or restrict access with a NetworkPolicy", "host", host, "port", o.port)
}

// watchWorkersFile applies --workers-file and keeps following it.
func watchWorkersFile(ctx context.Context, o *options, svc *core.Service) error {
	if o.workersFile == "" {
		return nil
	}
	if err := svc.WatchWorkersFile(ctx, core.WorkersFileConfig{Path: o.workersFile}); err != nil {
		return fmt.Errorf("--workers-file: %w", err)
	}
	return nil
}

// serve runs srv on ln, with TLS when --tls-cert is set.
func serve(o *options, srv *http.Server, ln net.Listener) error {
	if o.tlsCert != "" {
		return srv.ServeTLS(ln, o.tlsCert, o.tlsKey)
	}
	return srv.Serve(ln)
}
