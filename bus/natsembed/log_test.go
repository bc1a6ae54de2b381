package natsembed

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestServerLoggerBounded: 100k server log lines (a client's refused publishes) give at most
// the budget.
func TestServerLoggerBounded(t *testing.T) {
	var buf bytes.Buffer
	sl := NewServerLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	for range 100_000 {
		sl.Errorf("%s - cid:%d - Publish Violation", "127.0.0.1:1", 8)
	}
	lines := strings.Count(buf.String(), "\n")
	if lines > serverLogBurst || lines == 0 {
		t.Fatalf("%d lines for 100k errors, want 1..%d", lines, serverLogBurst)
	}
	if sl.Suppressed() != uint64(100_000-lines) {
		t.Fatalf("suppressed %d, want %d", sl.Suppressed(), 100_000-lines)
	}
}
