package recovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// StagingSink is a Sink that stages what it receives until its owner commits. FetchHTTP and
// FetchNATS call Discard after a failed attempt, so that partitions completed before the
// failure are dropped before the next peer is tried: a recovery uses one peer's dump whole.
type StagingSink interface {
	Sink
	// Discard drops every partition staged so far (the attempt failed).
	Discard(err error)
}

// Result describes a successful recovery fetch.
type Result struct {
	Source   string        // "http" or "nats"
	Peer     string        // the URL or replica id that answered
	Stats    Stats         // what was parsed
	Duration time.Duration // from the first attempt to the end of the winning parse
	Attempts int           // peers tried, the winner included
}

// HTTPOptions configures FetchHTTP. The zero value is usable.
type HTTPOptions struct {
	// Client performs the requests (default: a client with no overall timeout; Timeout bounds
	// each peer through the request context).
	Client *http.Client
	// Timeout bounds one peer's request, body included (default 10 s, Dynamo's value).
	Timeout time.Duration
	// Limits bound each document.
	Limits Limits
	// Logger receives one line per failed peer (default: discard).
	Logger *slog.Logger
}

// DefaultHTTPTimeout is the per-peer timeout of FetchHTTP (spec §11.3).
const DefaultHTTPTimeout = 10 * time.Second

// FetchHTTP recovers from the first peer whose GET <peer>/dump answers 2xx with a document that
// parses completely (spec §11.3). Peers are tried in order; a failure (unreachable, non-2xx,
// timeout, malformed or oversized document) is logged, the sink's staged partitions are
// discarded, and the next peer is tried. An empty dump is a success. When no peer succeeds the
// error wraps ErrNoPeer and every peer's error.
//
// A peer is a base URL ("http://host:port"); "host:port" gets "http://" prepended.
func FetchHTTP(ctx context.Context, peers []string, sink StagingSink, opts HTTPOptions) (Result, error) {
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	client := cmp.Or(opts.Client, &http.Client{})
	timeout := cmp.Or(max(opts.Timeout, 0), DefaultHTTPTimeout)
	start := time.Now()
	var errs []error
	for i, peer := range peers {
		st, err := fetchOne(ctx, client, timeout, peer, sink, opts.Limits)
		if err == nil {
			return Result{Source: "http", Peer: peer, Stats: st, Duration: time.Since(start), Attempts: i + 1}, nil
		}
		sink.Discard(err)
		log.Warn("index recovery from peer failed; trying the next one", "peer", peer, "err", err, "bytes", st.Bytes)
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	res := Result{Source: "http", Duration: time.Since(start), Attempts: len(errs)}
	if len(errs) == 0 {
		return res, fmt.Errorf("%w: no HTTP peers configured", ErrNoPeer)
	}
	return res, fmt.Errorf("%w: %w", ErrNoPeer, errors.Join(errs...))
}

// DumpURL returns the /dump URL of a peer base URL.
func DumpURL(peer string) string {
	if !strings.Contains(peer, "://") {
		peer = "http://" + peer
	}
	return strings.TrimRight(peer, "/") + "/dump"
}

func fetchOne(ctx context.Context, client *http.Client, timeout time.Duration, peer string, sink Sink, lim Limits) (Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, DumpURL(peer), nil)
	if err != nil {
		return Stats{}, fmt.Errorf("%w: %s: %w", ErrPeer, peer, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Stats{}, fmt.Errorf("%w: %s: %w", ErrPeer, peer, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Stats{}, fmt.Errorf("%w: %s: HTTP status %d", ErrPeer, peer, resp.StatusCode)
	}
	st, err := ParseDump(resp.Body, sink, lim)
	if err != nil {
		return st, fmt.Errorf("%w: %s: %w", ErrPeer, peer, err)
	}
	return st, nil
}
