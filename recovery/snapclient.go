package recovery

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/kvselect/kvselect/bus"
)

// SnapshotRequester sends one snapshot request to a replica and returns its reply;
// *bus.Replicator implements it. It must fail with an error wrapping bus.ErrNoResponders at once
// when nobody serves that replica's snapshot subject.
type SnapshotRequester interface {
	RequestSnapshot(ctx context.Context, peer string, req []byte) ([]byte, error)
}

// NATSOptions configures FetchNATS.
type NATSOptions struct {
	// Requester carries the requests (required).
	Requester SnapshotRequester
	// Candidates lists the replicas to ask, in order of preference; it is called again while
	// waiting for DiscoveryWait (required).
	Candidates func() []string
	// DiscoveryWait is how long to keep polling Candidates while it returns nothing (a replica
	// learns its peers from their heartbeats, about one interval after it joins). 0 = give up
	// at once: a replica that is alone starts empty immediately.
	DiscoveryWait time.Duration
	// PollInterval is the Candidates polling period during DiscoveryWait (default 50 ms).
	PollInterval time.Duration
	// Probe, when set, asks the bus for any replica that serves snapshots right now and returns
	// its id (an error wrapping bus.ErrNoResponders when none does). It is called on every
	// round, bounded by ProbeTimeout, so a live source is found at once rather than after its
	// next heartbeat; *bus.Replicator's ProbeSnapshotSource implements it.
	Probe func(ctx context.Context) (string, error)
	// ProbeTimeout bounds one Probe call (default 2 s).
	ProbeTimeout time.Duration
	// RetryFor is how long, from the start, failed rounds are retried (with backoff from
	// RetryBackoff doubling to 2 s) once a live source is known: the probe answered, or a peer
	// failed in a way other than "no responders" (a timeout, a digest or protocol error). A
	// replica that heard nobody stops after DiscoveryWait as before. Default 10 s; negative
	// disables retries.
	RetryFor time.Duration
	// RetryBackoff is the first pause between retried rounds (default 200 ms).
	RetryBackoff time.Duration
	// MaxChunk is the largest chunk body to ask for: the connection's MaxPayload minus headroom
	// for the reply header and NATS framing (required, at least MinChunkBytes).
	MaxChunk int
	// FirstChunkTimeout bounds the first request to a peer, which encodes the snapshot
	// (default 30 s); ChunkTimeout bounds each later one (default 5 s).
	FirstChunkTimeout time.Duration
	ChunkTimeout      time.Duration
	// Deadline bounds the whole fetch, all peers included (default 2 min).
	Deadline time.Duration
	// Limits bound the document.
	Limits Limits
	// Logger receives one line per failed peer (default: discard).
	Logger *slog.Logger
}

// NATS fetch defaults and the headroom callers subtract from MaxPayload.
const (
	DefaultFirstChunkTimeout = 30 * time.Second
	DefaultChunkTimeout      = 5 * time.Second
	DefaultNATSDeadline      = 2 * time.Minute
	// ChunkHeadroom is what to subtract from nc.MaxPayload() for the reply header and slack.
	ChunkHeadroom = 4 << 10
)

// ChunkLimit returns the chunk body to ask for under a connection's max payload.
func ChunkLimit(maxPayload int64) int {
	return int(max(maxPayload-ChunkHeadroom, MinChunkBytes))
}

// FetchNATS recovers from the first candidate replica that serves a complete snapshot. A
// candidate with no snapshot responder (gone, or still recovering itself) fails at once with
// "no responders" and the next is tried; a protocol, digest, timeout or parse failure discards
// what the sink staged and moves on too. With no candidates (after DiscoveryWait) or no
// success, the error wraps ErrNoPeer: the caller starts empty. With Probe set, each round first
// asks the bus for any live snapshot source; once a live source is known, failed rounds are
// retried with backoff until RetryFor.
//
// The snapshot is parsed while it arrives; its digest is verified before the parser sees the
// end of the payload, so a corrupted transfer never completes.
func FetchNATS(ctx context.Context, sink StagingSink, opts NATSOptions) (Result, error) {
	if opts.Requester == nil || opts.Candidates == nil {
		return Result{Source: "nats"}, fmt.Errorf("%w: FetchNATS needs a Requester and Candidates", ErrNoPeer)
	}
	if opts.MaxChunk < MinChunkBytes {
		return Result{Source: "nats"}, fmt.Errorf("%w: MaxChunk %d below %d", ErrProtocol, opts.MaxChunk, MinChunkBytes)
	}
	opts = natsDefaults(opts)
	log := opts.Logger
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, opts.Deadline)
	defer cancel()

	// Candidates are tried as they become known: the probe's answer, peers, then live members.
	// A candidate that answers "no responders" (gone, or itself still recovering) is skipped,
	// and while the discovery window lasts, members heard later are tried too. Once a live
	// source is known to exist, failed rounds are retried with backoff until RetryFor.
	deadline := start.Add(opts.DiscoveryWait)
	retryUntil := start.Add(opts.RetryFor)
	backoff := opts.RetryBackoff
	tried := map[string]bool{}
	live := false // a source exists: the probe answered or a peer failed other than "no responders"
	var errs []error
	for {
		round := opts.Candidates()
		if id, ok := probe(ctx, opts); ok {
			live = true
			round = append([]string{id}, round...)
		}
		for _, peer := range round {
			if tried[peer] {
				continue
			}
			tried[peer] = true
			st, err := fetchSnapshot(ctx, peer, sink, opts)
			if err == nil {
				return Result{Source: "nats", Peer: peer, Stats: st, Duration: time.Since(start), Attempts: len(errs) + 1}, nil
			}
			sink.Discard(err)
			if errors.Is(err, bus.ErrNoResponders) {
				log.Info("peer serves no snapshot (gone or still recovering)", "peer", peer)
			} else {
				live = true
				log.Warn("snapshot recovery from peer failed; trying the next one", "peer", peer, "err", err, "bytes", st.Bytes)
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		if ctx.Err() != nil {
			break
		}
		now := time.Now()
		var pause time.Duration
		switch {
		case now.Before(deadline): // discovery: poll for candidates heard later
			pause = min(opts.PollInterval, deadline.Sub(now))
		case live && now.Before(retryUntil): // retry every candidate after a pause
			pause = min(backoff, retryUntil.Sub(now))
			backoff = min(2*backoff, maxRetryBackoff)
			clear(tried)
			log.Info("snapshot recovery round failed; retrying", "in", pause, "until", retryUntil.Format(time.RFC3339))
		default:
			pause = -1
		}
		if pause < 0 {
			break
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
	res := Result{Source: "nats", Duration: time.Since(start), Attempts: len(errs)}
	if len(errs) == 0 {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("%w: %w", ErrNoPeer, err)
		}
		return res, fmt.Errorf("%w: no live replica to ask (alone on the bus)", ErrNoPeer)
	}
	return res, fmt.Errorf("%w: %w", ErrNoPeer, errors.Join(errs...))
}

// NATS retry defaults (see NATSOptions.RetryFor).
const (
	DefaultRetryFor     = 10 * time.Second
	DefaultRetryBackoff = 200 * time.Millisecond
	DefaultProbeTimeout = 2 * time.Second
	maxRetryBackoff     = 2 * time.Second
)

// probe asks opts.Probe for a live snapshot source; ok is false when there is no probe, nobody
// answered, or the probe failed (logged: a broken probe must not stop recovery).
func probe(ctx context.Context, opts NATSOptions) (string, bool) {
	if opts.Probe == nil {
		return "", false
	}
	pctx, cancel := context.WithTimeout(ctx, opts.ProbeTimeout)
	defer cancel()
	id, err := opts.Probe(pctx)
	if err != nil {
		if !errors.Is(err, bus.ErrNoResponders) {
			opts.Logger.Debug("snapshot probe failed", "err", err)
		}
		return "", false
	}
	return id, true
}

// natsDefaults gives every unset (zero or negative) option its default, except that a
// negative RetryFor (no retries) is kept.
func natsDefaults(o NATSOptions) NATSOptions {
	o.PollInterval = cmp.Or(max(o.PollInterval, 0), 50*time.Millisecond)
	o.ProbeTimeout = cmp.Or(max(o.ProbeTimeout, 0), DefaultProbeTimeout)
	o.RetryFor = cmp.Or(o.RetryFor, DefaultRetryFor)
	o.RetryBackoff = cmp.Or(max(o.RetryBackoff, 0), DefaultRetryBackoff)
	o.FirstChunkTimeout = cmp.Or(max(o.FirstChunkTimeout, 0), DefaultFirstChunkTimeout)
	o.ChunkTimeout = cmp.Or(max(o.ChunkTimeout, 0), DefaultChunkTimeout)
	o.Deadline = cmp.Or(max(o.Deadline, 0), DefaultNATSDeadline)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	return o
}

// fetchSnapshot pulls one peer's snapshot chunk by chunk into a parser goroutine.
func fetchSnapshot(ctx context.Context, peer string, sink Sink, o NATSOptions) (Stats, error) {
	first, err := requestChunk(ctx, o, peer, chunkRequest{maxChunk: uint32(min(o.MaxChunk, 1<<31))}, o.FirstChunkTimeout)
	if err != nil {
		return Stats{}, err
	}
	if first.total == 0 || uint64(len(first.body)) > first.size {
		return Stats{}, fmt.Errorf("%w: %s: first chunk claims %d chunks, %d bytes", ErrProtocol, peer, first.total, first.size)
	}
	pr, pw := io.Pipe()
	type parsed struct {
		st  Stats
		err error
	}
	done := make(chan parsed, 1)
	go func() {
		st, err := ParseDump(pr, sink, o.Limits)
		pr.CloseWithError(errParserDone) // unblock the writer if the parser stopped early
		done <- parsed{st, err}
	}()
	feedErr := feed(ctx, o, peer, first, pw)
	if feedErr != nil {
		pw.CloseWithError(feedErr)
	} else {
		_ = pw.Close()
	}
	res := <-done
	switch {
	case feedErr != nil && !errors.Is(feedErr, errParserDone):
		return res.st, feedErr
	case res.err != nil:
		return res.st, fmt.Errorf("%w: %s: %w", ErrPeer, peer, res.err)
	}
	return res.st, nil
}

// errParserDone tells the feeder the parser stopped reading (its own error is the one to report).
var errParserDone = errors.New("recovery: parser stopped")

// feed writes every chunk to w, checking identity, order and the digest; the payload's end is
// released only after the digest matched.
func feed(ctx context.Context, o NATSOptions, peer string, first chunkReply, w io.Writer) error {
	h := sha256.New()
	var got uint64
	put := func(c chunkReply) error {
		got += uint64(len(c.body))
		if got > first.size {
			return fmt.Errorf("%w: %s: more bytes than the announced %d", ErrProtocol, peer, first.size)
		}
		h.Write(c.body)
		_, err := w.Write(c.body)
		return err
	}
	if err := put(first); err != nil {
		return err
	}
	for seq := uint32(1); seq < first.total; seq++ {
		c, err := requestChunk(ctx, o, peer, chunkRequest{id: first.id, seq: seq, maxChunk: uint32(min(o.MaxChunk, 1<<31))}, o.ChunkTimeout)
		if err != nil {
			return err
		}
		if c.id != first.id || c.seq != seq || c.total != first.total || c.size != first.size || c.sum != first.sum {
			return fmt.Errorf("%w: %s: chunk %d does not belong to snapshot (id, seq, total, size or digest changed)", ErrProtocol, peer, seq)
		}
		if err := put(c); err != nil {
			return err
		}
	}
	if got != first.size {
		return fmt.Errorf("%w: %s: received %d of %d bytes", ErrProtocol, peer, got, first.size)
	}
	if [32]byte(h.Sum(nil)) != first.sum {
		return fmt.Errorf("%w: %s", ErrDigest, peer)
	}
	return nil
}

// requestChunk sends one request and validates the reply frame.
func requestChunk(ctx context.Context, o NATSOptions, peer string, req chunkRequest, timeout time.Duration) (chunkReply, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b, err := o.Requester.RequestSnapshot(cctx, peer, req.encode())
	if err != nil {
		return chunkReply{}, fmt.Errorf("%w: %s: chunk %d: %w", ErrPeer, peer, req.seq, err)
	}
	c, err := decodeReply(b)
	if err != nil {
		return c, fmt.Errorf("%s: %w", peer, err)
	}
	if c.status != statusOK {
		return c, fmt.Errorf("%w: %s: chunk %d refused: %.200s", ErrPeer, peer, req.seq, c.body)
	}
	if c.format != formatDumpV1 {
		return c, fmt.Errorf("%w: %s: payload format %d not supported", ErrProtocol, peer, c.format)
	}
	if c.seq != req.seq || len(c.body) > o.MaxChunk || (c.seq+1 < c.total && len(c.body) == 0) {
		return c, fmt.Errorf("%w: %s: reply for chunk %d has seq %d, %d bytes", ErrProtocol, peer, req.seq, c.seq, len(c.body))
	}
	return c, nil
}
