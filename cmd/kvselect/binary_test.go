package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/logbuf"
)

// Tests of the real binary: built once per test run (with a version stamped in by -ldflags, as a
// release build does), started on loopback ports, signalled, and observed through HTTP and its
// log. Every wait polls for its condition with a generous deadline (loaded CI machines).

const (
	binDeadline    = 60 * time.Second
	testBinVersion = "v0.0.0-bintest"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// kvselectBinary builds ./cmd/kvselect once.
func kvselectBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "kvselect-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "kvselect")
		out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+testBinVersion, "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// proc is a running kvselect.
type proc struct {
	cmd  *exec.Cmd
	log  *logbuf.Buffer
	done chan error
	base string
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// startKVSelect runs the binary with args (plus --host/--port) and env; it is killed at cleanup
// if still running.
func startKVSelect(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	port := freePort(t)
	args = append([]string{"--host", "127.0.0.1", "--port", fmt.Sprint(port)}, args...)
	cmd := exec.Command(kvselectBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{cmd: cmd, log: &logbuf.Buffer{}, done: make(chan error, 1), base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("kvselect log:\n%s", p.log.String())
		}
	})
	return p
}

// eventually polls cond every 20 ms until it holds or binDeadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(binDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", binDeadline, what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not synchronisation
	}
}

// waitExit waits for the process to exit and returns its error.
func (p *proc) waitExit(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(binDeadline):
		t.Fatalf("kvselect did not exit within %v", binDeadline)
		return nil
	}
}

func (p *proc) do(method, path, body string) (int, string, error) {
	req, err := http.NewRequest(method, p.base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: binDeadline}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// mustDo is do that fails the test on a transport error or an unexpected status.
func (p *proc) mustDo(t *testing.T, method, path, body string, want int) string {
	t.Helper()
	code, b, err := p.do(method, path, body)
	if err != nil || code != want {
		t.Fatalf("%s %s = %d %q, %v; want %d", method, path, code, b, err, want)
	}
	return b
}

func TestVersionFlag(t *testing.T) {
	out, err := exec.Command(kvselectBinary(t), "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	if s := string(out); !strings.HasPrefix(s, "kvselect "+testBinVersion+" (go") {
		t.Fatalf("--version printed %q", s)
	}
}

// Flag values that used to fail only after "kvselect listening" (or be replaced silently) stop
// startup with a message naming the flag.
func TestStartupRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats-recovery", "bogus"}, "--nats-recovery"},
		{[]string{"--sweep-interval", "0"}, "--sweep-interval"},
		{[]string{"--shutdown-grace", "-1s"}, "--shutdown-grace"},
		{[]string{"--nats-url", "http://127.0.0.1:4222"}, "--nats-url"},
		{[]string{"--nats-url", "nats://127.0.0.1:4222,https://x"}, "--nats-url"},
	} {
		var out logbuf.Buffer
		cmd := exec.Command(kvselectBinary(t), append([]string{"--port", "1"}, tc.args...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("%v: exit %v, want status 1\n%s", tc.args, err, out.String())
			continue
		}
		if s := out.String(); !strings.Contains(s, tc.want) || strings.Contains(s, "listening") {
			t.Errorf("%v: output does not name %s before listening:\n%s", tc.args, tc.want, s)
		}
	}
}

// An unreachable --nats-url is reported at startup with its address and the dial error.
func TestUnreachableNATSReported(t *testing.T) {
	port := freePort(t) // closed again: nothing listens there
	p := startKVSelect(t, []string{"DYN_ROUTER_USE_KV_EVENTS=false"}, "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", port), "--nats-recovery", "off")
	want := fmt.Sprintf("addr=127.0.0.1:%d", port)
	eventually(t, "the unreachable-NATS log line", func() bool {
		s := p.log.String()
		return strings.Contains(s, "NATS server unreachable") && strings.Contains(s, want) && strings.Contains(s, "connection refused")
	})
}

// Unparsable DYN_ROUTER_* values are logged by the binary, naming the variable.
func TestEnvWarningsLogged(t *testing.T) {
	p := startKVSelect(t, []string{"DYN_ROUTER_USE_KV_EVENTS=maybe", "DYN_ROUTER_QUEUE_THRESHOLD=lots", "DYN_ROUTER_TTL_SECS=-5"}, "--shutdown-grace", "0")
	eventually(t, "the startup line", func() bool { return strings.Contains(p.log.String(), "kvselect listening") })
	s := p.log.String()
	for _, v := range []string{"DYN_ROUTER_USE_KV_EVENTS", "DYN_ROUTER_QUEUE_THRESHOLD", "DYN_ROUTER_TTL_SECS"} {
		if !strings.Contains(s, "variable="+v) {
			t.Errorf("no warning naming %s", v)
		}
	}
}
