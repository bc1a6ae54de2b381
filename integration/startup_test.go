package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
)

// TestHTTPServesDuringRecovery: while startup recovery waits on a slow --indexer-peers peer, the
// HTTP port already answers: /health is 200 (liveness probes pass) and /ready is 503; once the
// peer answers, /ready follows the catalog. A SIGTERM during recovery shuts down cleanly.
func TestHTTPServesDuringRecovery(t *testing.T) {
	needBinaries(t)
	release := make(chan struct{})
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	defer peer.Close()
	defer close(release)

	r := &replica{id: "recovering", port: freePort(t)}
	r.args = []string{"--host", "127.0.0.1", "--port", fmt.Sprint(r.port), "--replica-id", r.id,
		"--cluster", "it", "--indexer-peers", peer.URL}
	r.base = fmt.Sprintf("http://127.0.0.1:%d", r.port)
	r.p = startProc(t, "kvselect:"+r.id, kvselectBin, []string{"DYN_ROUTER_USE_KV_EVENTS=false"}, r.args...)
	waitFor(t, syncTimeout, func() error {
		if code, err := r.call("GET", "/health", nil, nil); err != nil || code != http.StatusOK {
			return fmt.Errorf("/health: %d %v", code, err)
		}
		return nil
	})
	if code, _ := r.call("GET", "/ready", nil, nil); code != http.StatusServiceUnavailable {
		t.Fatalf("/ready during recovery: %d, want 503", code)
	}
	// SIGTERM while recovery still waits on the peer: the process exits on its own, promptly.
	if err := r.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, syncTimeout, func() error {
		if done, _ := r.p.exited(); !done {
			return fmt.Errorf("still running after SIGTERM during recovery")
		}
		return nil
	})
}
