package recovery

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus"
)

// A live source that was never heard in a heartbeat (Candidates stays empty, no discovery wait)
// is found by the probe.
func TestFetchNATSProbeFindsUnheardSource(t *testing.T) {
	m := &memRequester{servers: map[string]*SnapshotServer{"a": NewSnapshotServer(staticSource(genDump(1, 2, 3)), ServerOptions{})}}
	o := natsOpts(m)
	var probes atomic.Int32
	o.Probe = func(context.Context) (string, error) { probes.Add(1); return "a", nil }
	s := newRecSink(t)
	res, err := FetchNATS(context.Background(), s, o)
	if err != nil || res.Peer != "a" || s.blocks() != 1*2*3 || probes.Load() != 1 {
		t.Fatalf("res %+v err %v blocks %d probes %d", res, err, s.blocks(), probes.Load())
	}
	// Nobody answering the probe is "alone": immediate, as before.
	o.Probe = func(context.Context) (string, error) { return "", fmt.Errorf("x: %w", bus.ErrNoResponders) }
	start := time.Now()
	if _, err := FetchNATS(context.Background(), newRecSink(t), o); !errors.Is(err, ErrNoPeer) {
		t.Fatalf("alone: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("alone took %v", d)
	}
}

// flakyRequester fails peer's first n requests as a timeout would, before they reach the
// server (so no abandoned transfer holds a server slot), and passes the rest to m.
type flakyRequester struct {
	*memRequester
	peer  string
	n     int32
	fails atomic.Int32
}

func (f *flakyRequester) RequestSnapshot(ctx context.Context, peer string, req []byte) ([]byte, error) {
	if peer == f.peer && f.fails.Load() < f.n {
		f.fails.Add(1)
		return nil, fmt.Errorf("injected: %w", bus.ErrTimeout)
	}
	return f.memRequester.RequestSnapshot(ctx, peer, req)
}

// A live peer that fails transiently is retried with backoff until the first success.
func TestFetchNATSRetriesUntilSuccess(t *testing.T) {
	m := &memRequester{servers: map[string]*SnapshotServer{"a": NewSnapshotServer(staticSource(genDump(1, 2, 3)), ServerOptions{})}}
	f := &flakyRequester{memRequester: m, peer: "a", n: 2}
	o := natsOpts(m, "a")
	o.Requester = f
	o.RetryFor, o.RetryBackoff = time.Minute, time.Millisecond
	o.Deadline = 2 * time.Minute
	s := newRecSink(t)
	res, err := FetchNATS(context.Background(), s, o)
	if err != nil || res.Peer != "a" || res.Attempts != 3 || f.fails.Load() != 2 || s.blocks() != 1*2*3 {
		t.Fatalf("res %+v err %v injected failures %d blocks %d", res, err, f.fails.Load(), s.blocks())
	}
}

// Retries stop at RetryFor; a candidate that only ever answers "no responders" is not retried.
func TestFetchNATSRetryBound(t *testing.T) {
	m := &memRequester{servers: map[string]*SnapshotServer{"a": NewSnapshotServer(staticSource(genDump(1, 2, 3)), ServerOptions{})}}
	f := &flakyRequester{memRequester: m, peer: "a", n: 1 << 30}
	o := natsOpts(m, "a")
	o.Requester = f
	const bound = 300 * time.Millisecond
	o.RetryFor, o.RetryBackoff = bound, 10*time.Millisecond
	start := time.Now()
	_, err := FetchNATS(context.Background(), newRecSink(t), o)
	if d := time.Since(start); !errors.Is(err, ErrNoPeer) || d < bound || f.fails.Load() < 2 {
		t.Fatalf("err %v after %v with %d rounds; want ErrNoPeer after ≥ %v and ≥ 2 rounds", err, d, f.fails.Load(), bound)
	}
	m.calls.Store(0)
	o = natsOpts(m, "ghost")
	o.RetryFor = time.Minute
	start = time.Now()
	if _, err := FetchNATS(context.Background(), newRecSink(t), o); !errors.Is(err, bus.ErrNoResponders) || m.calls.Load() != 1 {
		t.Fatalf("ghost: err %v, %d requests", err, m.calls.Load())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("ghost took %v; no live source must not be retried", d)
	}
}
