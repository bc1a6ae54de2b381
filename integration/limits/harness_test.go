// Package limits holds the real-process tests of issue 15's bounds: a built kvselect binary on
// a random loopback port, driven by raw sockets and HTTP clients, its resident memory read from
// /proc/<pid>/status. The CI-size tests run in the normal suite (not with -short); the full
// fault runs sit behind the build tag `fault`:
//
//	go test -tags fault -run Fault -v -timeout 20m ./integration/limits/
//
// Each fault test logs one line per scenario: failed requests, peak RSS and which limit acted.
package limits

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
)

var kvselectBin string

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if testing.Short() || runtime.GOOS != "linux" {
		return m.Run()
	}
	if b := os.Getenv("KVSELECT_LIMITS_BIN"); b != "" { // measure another build (a "before")
		kvselectBin = b
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "kvselect-limits-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "limits:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	kvselectBin = filepath.Join(dir, "kvselect")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", kvselectBin, "github.com/kvselect/kvselect/cmd/kvselect")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "limits: building kvselect:", err)
		return 1
	}
	return m.Run()
}

// server is one kvselect child process.
type server struct {
	t    testing.TB
	cmd  *exec.Cmd
	addr string // host:port
	url  string
	log  string
}

// startServer runs kvselect on a free loopback port with extra flags and env, waits for
// /health, and kills it in t.Cleanup.
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	if kvselectBin == "" {
		t.Skip("real-process limit tests need linux and no -short")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	logPath := filepath.Join(t.TempDir(), "kvselect.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	all := append([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--replica-id", "limits-" + strconv.Itoa(port), "--log-level", "warn"}, args...)
	cmd := exec.Command(kvselectBin, all...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, addr: "127.0.0.1:" + strconv.Itoa(port), log: logPath}
	s.url = "http://" + s.addr
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("--- kvselect output (tail) ---\n%s", b)
		}
	})
	poll.True(t, 60*time.Second, "kvselect /health", func() bool {
		resp, err := http.Get(s.url + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// rssKiB reads VmRSS of the child from /proc.
func (s *server) rssKiB() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		s.t.Fatalf("reading child status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	s.t.Fatal("no VmRSS in child status")
	return 0
}

// peakKiB reads VmHWM (the child's peak RSS).
func (s *server) peakKiB() int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// call sends a JSON request and returns the status and body.
func (s *server) call(method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// metric returns the value of one unlabelled metric line from /metrics (-1 when absent).
func (s *server) metric(name string) float64 {
	_, b, err := s.call("GET", "/metrics", nil)
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return -1
}

// stallUploads opens n connections, each sending headers for a body of declared bytes and
// then sent bytes of it, and leaves them open. It returns the connections.
func stallUploads(t *testing.T, addr string, n, declared, sent int) []net.Conn {
	t.Helper()
	chunk := bytes.Repeat([]byte(" "), 256<<10)
	chunk[0] = '{'
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /workers HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", declared)
		go func() {
			left := sent
			for left > 0 {
				k := min(left, len(chunk))
				if _, err := c.Write(chunk[:k]); err != nil {
					return // refused or cut: the server closed it
				}
				left -= k
			}
		}()
	}
	return conns
}

const mib = 1024 // KiB per MiB (RSS is read in KiB)
