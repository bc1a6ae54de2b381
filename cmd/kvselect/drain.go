package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/kvselect/kvselect/core"
)

// Graceful shutdown (SIGTERM), in order:
//
//  1. drain: for --shutdown-grace, GET /ready answers 503 with "draining": true while every
//     other route is served as before, so load balancers and Kubernetes endpoints stop sending
//     new work to this replica before it stops accepting any;
//  2. the listener closes (http.Server.Shutdown): no new connections, idle ones are closed;
//  3. the service closes: requests parked in the router queue are answered 503 with the
//     documented shutdown error ({"error":"selection service is shutting down"}), and in-flight
//     requests finish (a selection racing the close gets the same 503);
//  4. run returns once every handler has returned, or after --shutdown-timeout, when the
//     remaining connections are closed.
//
// SIGINT (Ctrl-C at a terminal) skips the drain period. A second signal during the drain kills
// the process (signal.NotifyContext's stop restores the default action).

// drainState marks the replica as draining; its middleware answers /ready accordingly.
type drainState struct {
	svc *core.Service
	// close closes the service (step 3); nil means svc.Close. The binary stops Service.Run and
	// waits for it.
	close    func() error
	draining atomic.Bool
}

// drainingReadiness is the /ready body while draining: the usual readiness document, with
// ready false and draining true.
type drainingReadiness struct {
	core.Readiness
	Draining bool `json:"draining"`
}

// wrap serves /ready (GET and HEAD) itself while draining and passes everything else on.
func (d *drainState) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining.Load() && r.URL.Path == "/ready" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			rd := drainingReadiness{Readiness: d.svc.Ready(), Draining: true}
			rd.Ready = false
			b, err := json.Marshal(rd)
			if err != nil {
				b = []byte(`{"ready":false,"draining":true}`)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(b)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// shutdown runs steps 1–4 above. grace is 0 for SIGINT or --shutdown-grace 0. serveErr receives
// srv.Serve's result.
func (d *drainState) shutdown(log *slog.Logger, srv *http.Server, grace, timeout time.Duration, serveErr <-chan error) error {
	if grace > 0 {
		d.draining.Store(true)
		log.Info("draining: /ready answers 503 while requests are still served", "grace", grace)
		t := time.NewTimer(grace)
		select {
		case <-t.C:
		case err := <-serveErr:
			t.Stop()
			return err
		}
	}
	log.Info("closing the listener; finishing in-flight requests", "timeout", timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	// Shutdown has closed the listeners once Serve returned; closing the service then fails
	// parked requests with 503 and lets their handlers return.
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("HTTP server stopped", "err", err)
	}
	if d.close != nil {
		_ = d.close()
	} else {
		_ = d.svc.Close()
	}
	err := <-done
	if err != nil {
		log.Warn("in-flight requests did not finish before --shutdown-timeout; closing their connections", "err", err)
		_ = srv.Close()
		return nil
	}
	log.Info("shut down cleanly")
	return nil
}
