package main

import (
	"flag"
	"fmt"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
)

// limitOptions are the --http-* server limits (issue 15); defaults are api.DefaultLimits.
type limitOptions struct {
	http         api.Limits
	engine       engine.Limits
	maxListeners int
}

// registerLimitFlags adds the limit flags to fs.
func registerLimitFlags(fs *flag.FlagSet, o *limitOptions) {
	d := api.DefaultLimits()
	fs.DurationVar(&o.http.ReadHeaderTimeout, "http-read-header-timeout", d.ReadHeaderTimeout, "HTTP: cut a client that has not sent its request headers within this time")
	fs.DurationVar(&o.http.ReadTimeout, "http-read-timeout", d.ReadTimeout, "HTTP: cut a request (headers and body) not read within this time: a slow body gets 408 (0 = none)")
	fs.DurationVar(&o.http.WriteTimeout, "http-write-timeout", d.WriteTimeout, "HTTP: bound on writing one response (0 = none; GET /dump streams)")
	fs.DurationVar(&o.http.IdleTimeout, "http-idle-timeout", d.IdleTimeout, "HTTP: close keep-alive connections idle this long")
	fs.IntVar(&o.http.MaxHeaderBytes, "http-max-header-bytes", d.MaxHeaderBytes, "HTTP: request header size limit (431 beyond it)")
	fs.IntVar(&o.http.MaxConns, "http-max-conns", d.MaxConns, "HTTP: open client connections; beyond it a connection is answered 503 at once and closed (0 = unlimited)")
	e := engine.DefaultLimits()
	fs.IntVar(&o.engine.MaxRequestTokens, "max-request-tokens", e.MaxRequestTokens, "token_ids per request; more is 413 (-1 = unlimited)")
	fs.IntVar(&o.engine.MaxRequestHashes, "max-request-hashes", e.MaxRequestHashes, "block/sequence hashes per request, and blocks a token prompt hashes into; more is 413 (-1 = unlimited)")
	fs.IntVar(&o.engine.MaxBookings, "max-bookings", e.MaxBookings, "live bookings, local and mirrored; more is 429 (-1 = unlimited)")
	fs.IntVar(&o.engine.MaxBookingsPerWorker, "max-bookings-per-worker", e.MaxBookingsPerWorker, "live bookings on one worker; more is 429 (-1 = unlimited)")
	fs.Int64Var(&o.engine.MaxBookedBlocks, "max-booked-blocks", e.MaxBookedBlocks, "tracking hashes held by all live bookings; more is 429 (-1 = unlimited)")
	fs.IntVar(&o.engine.MaxWorkers, "max-workers", e.MaxWorkers, "catalog records; a new worker beyond it is 507 (-1 = unlimited)")
	fs.IntVar(&o.engine.MaxPartitions, "max-partitions", e.MaxPartitions, "(model_name, routing_group) partitions; a worker opening one beyond it is 507 (-1 = unlimited)")
	fs.Float64Var(&o.engine.IndexHeadroom, "index-headroom", e.IndexHeadroom, "KV-index budget of a rank as a multiple of its worker's total_kv_blocks (oldest blocks evicted past it)")
	fs.IntVar(&o.engine.MaxIndexBlocksPerRank, "max-index-blocks-per-rank", e.MaxIndexBlocksPerRank, "KV-index budget of a rank whose worker declared no total_kv_blocks (-1 = unlimited)")
	fs.IntVar(&o.engine.ApproxMaxBlocks, "approx-max-blocks", e.ApproxMaxBlocks, "approximate-index (use_kv_events=false) entries per partition before pruning (Dynamo's max_tree_size; -1 = unlimited)")
	fs.Float64Var(&o.engine.ApproxPruneRatio, "approx-prune-ratio", e.ApproxPruneRatio, "the approximate index is pruned to this fraction of --approx-max-blocks")
	fs.IntVar(&o.maxListeners, "max-kv-listeners", core.DefaultMaxKVListeners, "KV-event listeners (ZMQ SUB sockets); ranks beyond it, or on an endpoint another rank already uses, get a failed listener (-1 = unlimited)")
	fs.Int64Var(&o.http.MaxBodyBytesInFlight, "http-max-body-bytes-in-flight", d.MaxBodyBytesInFlight, "HTTP: memory held by request bodies being read, over all requests; beyond it a request gets 503 (0 = unlimited)")
}

// validate rejects negative HTTP limits (the engine's limits are core.Config.Validate's).
func (o *limitOptions) validate() error {
	l := o.http
	if l.ReadHeaderTimeout < 0 || l.ReadTimeout < 0 || l.WriteTimeout < 0 || l.IdleTimeout < 0 || l.MaxHeaderBytes < 0 || l.MaxConns < 0 || l.MaxBodyBytesInFlight < 0 {
		return fmt.Errorf("--http-* limits must not be negative")
	}
	return nil
}
