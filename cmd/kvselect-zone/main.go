// Command kvselect-zone shows how a Go program embeds kvselect with its own routing strategy: it
// serves the standard selection API (the same routes as kvselect) with a custom scorer that
// prefers workers in the caller's zone.
//
// A caller names its zone in session_context.agent_headers["x-zone"]; workers declare theirs in
// topology_domains["zone"] at registration. The zone term is added to kvselect's built-in cost
// with --zone-weight, in the built-in cost's unit (milliseconds of estimated time to first token
// with the default kvselect policy): a weight of 200 sends a request to its own zone unless
// another zone would serve it more than 200 ms sooner.
//
//	go run ./cmd/kvselect-zone --port 8093 --zone-weight 200
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
)

// sameZone scores −1 for a candidate in the caller's zone and 0 otherwise; it reads only its
// arguments, allocates nothing and keeps no state, as the Scorer contract asks.
func sameZone(ctx *core.SelectionContext, c *core.Candidate) float64 {
	zone := ctx.AgentHeaders["x-zone"]
	if len(zone) > 0 && zone[0] != "" && c.Worker.TopologyDomains["zone"] == zone[0] {
		return -1
	}
	return 0
}

func main() {
	port := flag.Int("port", 8093, "HTTP port")
	weight := flag.Float64("zone-weight", 200, "weight of the same-zone preference")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*port, *weight, log); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "kvselect-zone:", err)
		os.Exit(1)
	}
}

func run(port int, weight float64, log *slog.Logger) error {
	cfg, err := core.ConfigFromEnv(os.LookupEnv, nil)
	if err != nil {
		return err
	}
	cfg.Engine.Policy = engine.PolicyKVSelect
	cfg.Logger = log
	cfg.Scoring = core.Scoring{Scorers: []core.WeightedScorer{
		{Name: "same-zone", Weight: weight, Scorer: core.ScorerFunc(sameZone)},
	}}
	svc, err := core.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() { _ = svc.Run(ctx) }() // KV events, gate, sweep; closes the service when run returns
	addr := net.JoinHostPort("0.0.0.0", strconv.Itoa(port))
	log.Info("kvselect-zone listening", "addr", addr, "zone_weight", weight)
	return http.ListenAndServe(addr, api.New(svc, api.Options{Logger: log}))
}
