package bus

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An in-process connection logs its own embedded server's client URL, not nats.go's default
// nats://127.0.0.1:4222 (which would name another replica's server on a shared host).
func TestEmbeddedConnectionLogsItsOwnURL(t *testing.T) {
	e, err := StartEmbedded(EmbeddedOptions{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Shutdown() })
	var buf lockedBuffer
	nc := connect(t, ConnConfig{Embedded: e, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	waitFor(t, func() error {
		if !strings.Contains(buf.String(), "nats connected") {
			return errors.New("no connected line yet")
		}
		return nil
	})
	_ = nc
	s := buf.String()
	if !strings.Contains(s, "url=\"in-process "+e.ClientURL()+"\"") || strings.Contains(s, ":4222") {
		t.Fatalf("connected line does not name %s:\n%s", e.ClientURL(), s)
	}
}
