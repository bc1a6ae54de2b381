// Command kvselect-mockworker runs a simulated vLLM engine (package integration/mockworker):
// an HTTP completions endpoint that answers with simulated latency, and KV-cache events in
// vLLM's ZeroMQ wire format on a PUB endpoint with a replay ROUTER, so that kvselect (or any
// KV-aware router) can be exercised without GPUs.
//
//	kvselect-mockworker --http 127.0.0.1:8100 --kv-events tcp://127.0.0.1:5557 \
//	    --replay tcp://127.0.0.1:5558 --block-size 16 --num-gpu-blocks 16384 --speedup 1 --dp-size 1
//
// With --dp-size N each rank binds the kv-events and replay ports plus its rank offset (as vLLM
// does), so leave room between the two port ranges; port 0 picks random ports (logged). The
// worker runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kvselect/kvselect/integration/fleet"
	"github.com/kvselect/kvselect/integration/mockworker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "kvselect-mockworker:", err)
		os.Exit(1)
	}
}

// options are the parsed command-line flags.
type options struct {
	http, logLevel string
	cfg            mockworker.Config
}

// parseFlags parses args into options; usage and errors go to stderr.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("kvselect-mockworker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.http, "http", "127.0.0.1:8100", "HTTP listen address (host:port) for /v1/completions and /health")
	fs.StringVar(&o.cfg.KVEventsEndpoint, "kv-events", "tcp://127.0.0.1:5557", "ZMQ PUB endpoint to bind for KV events (rank 0; port offset per DP rank)")
	fs.StringVar(&o.cfg.ReplayEndpoint, "replay", "tcp://127.0.0.1:5558", "ZMQ ROUTER endpoint to bind for replay (rank 0; port offset per DP rank); empty disables replay")
	fs.IntVar(&o.cfg.BlockSize, "block-size", mockworker.DefaultBlockSize, "KV block size in tokens")
	fs.IntVar(&o.cfg.NumGPUBlocks, "num-gpu-blocks", mockworker.DefaultNumGPUBlocks, "KV cache capacity per DP rank, in blocks")
	fs.Float64Var(&o.cfg.Speedup, "speedup", 1, "run simulated time this many times faster than real time")
	fs.IntVar(&o.cfg.DPSize, "dp-size", 1, "number of data-parallel ranks")
	fs.IntVar(&o.cfg.DPStartRank, "dp-start-rank", 0, "global DP rank of the first local rank")
	fs.StringVar(&o.cfg.Topic, "topic", "", "topic frame of every KV-event message")
	fs.IntVar(&o.cfg.ReplayBuffer, "replay-buffer", mockworker.DefaultReplayBuffer, "batches kept per rank for replay")
	fs.Uint64Var(&o.cfg.HashSeed, "hash-seed", mockworker.DefaultHashSeed, "seed of the engine block hashes")
	fs.StringVar(&o.cfg.Model, "model", fleet.PresetLegacy, "engine timing preset: "+strings.Join(fleet.AllPresetNames(), ", "))
	fs.IntVar(&o.cfg.DefaultMaxTokens, "default-max-tokens", mockworker.DefaultMaxTokens, "decode length when a request gives no max_tokens")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.cfg.BlockSize <= 0 || o.cfg.NumGPUBlocks <= 0 || o.cfg.DPSize <= 0 {
		return o, errors.New("--block-size, --num-gpu-blocks and --dp-size must be positive")
	}
	return o, nil
}

// run starts the worker and its HTTP server and blocks until ctx ends. ready, when non-nil,
// is called with the bound HTTP address and the worker once both are serving (for tests).
func run(ctx context.Context, args []string, stderr io.Writer, ready func(addr string, w *mockworker.Worker)) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	o.cfg.Logger = log
	w, err := mockworker.New(o.cfg)
	if err != nil {
		return err
	}
	defer w.Close()
	ln, err := net.Listen("tcp", o.http)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("mock worker serving", "http", ln.Addr().String(), "kv_events", w.Endpoints(),
		"replay", w.ReplayEndpoints(), "block_size", w.Config().BlockSize,
		"num_gpu_blocks", w.Config().NumGPUBlocks, "speedup", w.Config().Speedup, "model", w.Config().Model)
	if ready != nil {
		ready(ln.Addr().String(), w)
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	log.Info("mock worker stopped")
	return nil
}
