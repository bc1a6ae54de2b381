package mockworker

import (
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus/kvevents"
)

// testLogger logs to stderr under -v, otherwise discards.
func testLogger() *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// epoch0 is the start time of every fake clock in the tests.
var epoch0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newWorker starts a worker on loopback with cfg (random ports unless set) and closes it at
// cleanup.
func newWorker(t testing.TB, cfg Config) *Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// tokens returns n token ids starting at base (base, base+1, ...).
func tokens(base uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = base + uint32(i)
	}
	return out
}

// randTokens returns n random token ids.
func randTokens(rng *rand.Rand, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = rng.Uint32N(200000)
	}
	return out
}

func intp(v int) *int { return &v }

// decodeAll decodes every record with a fresh decoder and returns deep copies of the batches.
func decodeAll(t testing.TB, recs []Record) []kvevents.Batch {
	t.Helper()
	dec := kvevents.NewDecoder()
	out := make([]kvevents.Batch, 0, len(recs))
	for _, r := range recs {
		var b kvevents.Batch
		if err := dec.Decode(r.Payload, &b); err != nil {
			t.Fatalf("decode seq %d: %v", r.Seq, err)
		}
		out = append(out, cloneBatch(b))
	}
	return out
}

func cloneBatch(b kvevents.Batch) kvevents.Batch {
	c := b
	c.Events = make([]kvevents.Event, len(b.Events))
	for i, e := range b.Events {
		e.BlockHashes = append([]uint64(nil), e.BlockHashes...)
		e.TokenIDs = append([]uint32(nil), e.TokenIDs...)
		c.Events[i] = e
	}
	return c
}

// sim100ms is more model time than any short test request needs for one phase.
const sim100ms = 100 * time.Millisecond
