package integration

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
)

// TestWorkersFileRestartReady: a replica started with --workers-file is ready by itself, follows
// an edit of the file, refuses API writes to the ids the file owns, and after a restart is ready
// again without anyone registering a worker (what lets a node drain finish under the PDB).
func TestWorkersFileRestartReady(t *testing.T) {
	needBinaries(t)
	path := filepath.Join(t.TempDir(), "workers.yaml")
	write := func(s string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("- {worker_id: 1, endpoint: 'http://w1:8000', block_size: 4}\n")
	r := startReplica(t, "wf", "--workers-file", path)
	ready := func() error {
		code, err := r.call("GET", "/ready", nil, nil)
		if code != http.StatusOK {
			return fmt.Errorf("/ready %d %v", code, err)
		}
		return nil
	}
	waitFor(t, syncTimeout, ready)
	write("- {worker_id: 1, endpoint: 'http://w1:8000', block_size: 4}\n- {worker_id: 2, endpoint: 'http://w2:8000', block_size: 4}\n")
	waitFor(t, syncTimeout, func() error {
		var ws []core.WorkerRecord
		if _, err := r.call("GET", "/workers", nil, &ws); err != nil {
			return err
		}
		if len(ws) != 2 {
			return fmt.Errorf("%d workers", len(ws))
		}
		return nil
	})
	if code, _ := r.call("DELETE", "/workers/1", nil, nil); code != http.StatusConflict {
		t.Fatalf("DELETE of a file-owned worker: %d, want 409", code)
	}
	r.stopGracefully(t)
	r.start(t)
	// Ready by itself: nobody registers anything (startup recovery still gates /ready briefly).
	waitFor(t, syncTimeout, ready)
	var ws []core.WorkerRecord
	r.must(t, http.StatusOK, "GET", "/workers", nil, &ws)
	if len(ws) != 2 {
		t.Fatalf("restarted replica has %d workers, want the file's 2", len(ws))
	}
}

// TestTLSAndAuth: --tls-cert/--tls-key serve HTTPS; --auth-token-file guards the API while
// /health stays open.
func TestTLSAndAuth(t *testing.T) {
	needBinaries(t)
	dir := t.TempDir()
	// A self-signed test certificate for 127.0.0.1 (crypto/tls/generate_cert.go, P-256).
	cert, key := "testdata/tls/localhost-cert.pem", "testdata/tls/localhost-key.pem"
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	p := startProc(t, "kvselect:tls", kvselectBin, []string{"DYN_ROUTER_USE_KV_EVENTS=false"},
		"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--replica-id", "tls", "--cluster", "it",
		"--tls-cert", cert, "--tls-key", key, "--auth-token-file", tokens)
	defer p.kill(t)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	base := "https://127.0.0.1:" + strconv.Itoa(port)
	get := func(path, tok string) (int, error) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	waitFor(t, syncTimeout, func() error {
		if code, err := get("/health", ""); code != 200 {
			return fmt.Errorf("/health over TLS: %d %v", code, err)
		}
		return nil
	})
	if code, _ := get("/workers", ""); code != 401 {
		t.Errorf("/workers without a token: %d, want 401", code)
	}
	if code, _ := get("/workers", "s3cret"); code != 200 {
		t.Errorf("/workers with the token: %d, want 200", code)
	}
	if _, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/health"); err == nil {
		// Plain HTTP to a TLS port gets Go's 400 answer, not the API.
		if code, _ := func() (int, error) {
			resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/health")
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}(); code == 200 {
			t.Error("plain HTTP was served on the TLS port")
		}
	}
}
