// Package integration holds end-to-end tests that run real processes: kvselect replicas
// clustered over a real nats-server (external process, or the replicas' embedded servers
// routed into one NATS cluster), driven over HTTP on 127.0.0.1 only.
//
// The cluster tests (cluster*_test.go) build the kvselect binary and the upstream nats-server
// binary (from the nats-server module in go.mod) once per test binary in TestMain, start every
// process on random loopback ports, and kill each one in t.Cleanup. They never sleep to
// synchronise: every cross-process expectation is polled with a deadline. See README.md for
// how to run them and what each one shows.
package integration

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/internal/poll"
)

// Binaries built by TestMain; empty when the cluster tests are skipped (-short).
var (
	kvselectBin string
	natsBin     string
)

// syncTimeout bounds every "replicas converge" poll. Generous: the machine is shared and a
// resync after a NATS restart waits for the reconnect (about 1–1.5 s) plus the resync delay
// (2 s).
const syncTimeout = poll.Generous

// pollEvery is the polling interval of waitFor (not a synchronisation sleep).
const pollEvery = 20 * time.Millisecond

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

// runMain builds the binaries into a temporary directory (removed afterwards) and runs the
// tests. In -short mode nothing is built and the cluster tests skip.
func runMain(m *testing.M) int {
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "kvselect-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, b := range []struct{ out, pkg string }{
		{"kvselect", "github.com/kvselect/kvselect/cmd/kvselect"},
		{"nats-server", "github.com/nats-io/nats-server/v2"},
	} {
		out := filepath.Join(dir, b.out)
		cmd := exec.Command(goBin, "build", "-o", out, b.pkg)
		cmd.Stderr, cmd.Stdout = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "integration: building %s: %v\n", b.pkg, err)
			return 1
		}
	}
	kvselectBin, natsBin = filepath.Join(dir, "kvselect"), filepath.Join(dir, "nats-server")
	return m.Run()
}

// needBinaries skips the test in -short mode.
func needBinaries(t *testing.T) {
	t.Helper()
	if kvselectBin == "" {
		t.Skip("cluster tests run real processes; skipped with -short")
	}
}

// handedOut remembers every port freePort returned in this test binary: the kernel may hand a
// just-released ephemeral port out again, and two processes given the same port collide
// (seen: a replica's client port equal to another's route port).
var (
	handedOutMu sync.Mutex
	handedOut   = map[int]bool{}
)

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago and that no earlier call
// in this test binary returned.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		handedOutMu.Lock()
		fresh := !handedOut[port]
		handedOut[port] = true
		handedOutMu.Unlock()
		if fresh {
			return port
		}
	}
	t.Fatal("no fresh port after 100 tries")
	return 0
}

// proc is one child process. Its output goes to a file in the test's temp dir and is logged
// when the test fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has been waited for
	mu   sync.Mutex
	err  error // Wait's result (guarded by mu, valid after done)
}

// startProc starts bin with args and env (added to the test's environment) and registers a
// kill in t.Cleanup, so no test leaks a process.
func startProc(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), strings.ReplaceAll(name, "/", "_")+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 8000 {
				b = b[len(b)-8000:]
			}
			t.Logf("--- %s output (tail) ---\n%s", name, b)
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to be reaped. Idempotent.
func (p *proc) kill(t testing.TB) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(poll.Generous):
		t.Errorf("%s (pid %d) not reaped 10 s after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// exited reports whether the process has ended, with Wait's error.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// natsServer is an external nats-server process on 127.0.0.1.
type natsServer struct {
	port int
	p    *proc
}

// startNATS starts nats-server on port (0 = pick one) and waits until it accepts TCP
// connections.
func startNATS(t *testing.T, port int) *natsServer {
	t.Helper()
	if port == 0 {
		port = freePort(t)
	}
	p := startProc(t, "nats-server:"+strconv.Itoa(port), natsBin, nil,
		"--addr", "127.0.0.1", "--port", strconv.Itoa(port), "--http_port", "0")
	waitFor(t, syncTimeout, func() error {
		if done, err := p.exited(); done {
			return fmt.Errorf("%w: nats-server exited: %v", poll.ErrStop, err)
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
	return &natsServer{port: port, p: p}
}

// url is the client URL of the server.
func (n *natsServer) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

// replica is one kvselect process.
type replica struct {
	id   string
	port int
	base string // http://127.0.0.1:port
	args []string
	p    *proc
}

// startReplica starts kvselect with id, HTTP on a random loopback port, KV events off, and
// extra flags; it waits until the HTTP API answers.
func startReplica(t *testing.T, id string, extra ...string) *replica {
	t.Helper()
	r := &replica{id: id, port: freePort(t)}
	r.args = append([]string{"--shutdown-grace", "0", "--host", "127.0.0.1", "--port", strconv.Itoa(r.port), "--replica-id", id,
		"--cluster", "it", "--log-level", "debug"}, extra...)
	r.base = "http://127.0.0.1:" + strconv.Itoa(r.port)
	r.start(t)
	return r
}

// start (re)starts the process with the replica's arguments.
func (r *replica) start(t *testing.T) {
	t.Helper()
	r.p = startProc(t, "kvselect:"+r.id, kvselectBin, []string{"DYN_ROUTER_USE_KV_EVENTS=false"}, r.args...)
	waitFor(t, syncTimeout, func() error {
		if done, err := r.p.exited(); done {
			return fmt.Errorf("%w: %s exited: %v", poll.ErrStop, r.id, err)
		}
		_, err := r.call("GET", "/replica_sync/peers", nil, nil)
		return err
	})
}

// waitFor polls cond every pollEvery until it returns nil or the timeout passes, then fails the
// test with the last error. An error wrapping poll.ErrStop fails at once.
func waitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := poll.Poll(timeout, pollEvery, cond); err != nil {
		t.Fatalf("condition not met within %v: %v", timeout, err)
	}
}

var httpClient = &http.Client{Timeout: 30 * time.Second}

// statusError is a non-2xx answer.
type statusError struct {
	Code int
	Body string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

// call sends body (JSON-encoded unless nil) and decodes a 2xx answer into out (if non-nil). It
// returns the status code; a non-2xx status is a *statusError.
func (r *replica) call(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, r.base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, &statusError{resp.StatusCode, string(b)}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decoding %q: %w", method, path, b, err)
		}
	}
	return resp.StatusCode, nil
}

// must is call that fails the test unless the status is want.
func (r *replica) must(t testing.TB, want int, method, path string, body, out any) {
	t.Helper()
	code, err := r.call(method, path, body, out)
	if code != want {
		t.Fatalf("%s: %s %s = %d (%v), want %d", r.id, method, path, code, err, want)
	}
	if err != nil && want/100 == 2 {
		t.Fatalf("%s: %s %s: %v", r.id, method, path, err)
	}
}

// catalog is the worker catalog every replica registers: two workers with two DP ranks each.
var catalog = []map[string]any{
	{"worker_id": 1, "endpoint": "http://w1:8000", "block_size": 4, "data_parallel_size": 2},
	{"worker_id": 2, "endpoint": "http://w2:8000", "block_size": 4, "data_parallel_size": 2},
}

// registerCatalog registers the catalog on r.
func registerCatalog(t testing.TB, r *replica) {
	t.Helper()
	for _, w := range catalog {
		code, err := r.call("POST", "/workers", w, nil)
		if code != http.StatusOK && code != http.StatusCreated {
			t.Fatalf("%s: POST /workers = %d (%v)", r.id, code, err)
		}
	}
}

// prompt returns a 16-token prompt distinct per n.
func prompt(n int) []uint32 {
	toks := make([]uint32, 16)
	for i := range toks {
		toks[i] = uint32(n*1009 + i)
	}
	return toks
}

// book books selection id on r with a distinct prompt and returns the answer.
func book(t testing.TB, r *replica, id string, n int) core.SelectResponse {
	t.Helper()
	var resp core.SelectResponse
	r.must(t, http.StatusOK, "POST", "/select_and_reserve",
		map[string]any{"selection_id": id, "token_ids": prompt(n), "expected_output_tokens": 64}, &resp)
	return resp
}

// loads returns r's GET /loads.
func loads(r *replica) ([]core.PartitionLoads, error) {
	var out []core.PartitionLoads
	_, err := r.call("GET", "/loads", nil, &out)
	return out, err
}

// totalActive sums active requests over every rank.
func totalActive(ls []core.PartitionLoads) uint64 {
	var n uint64
	for _, p := range ls {
		for _, l := range p.Loads {
			n += l.ActiveRequests
		}
	}
	return n
}

// waitSameLoads polls until every other replica's /loads equals ref's and ref has want active
// requests; it returns the converged loads.
func waitSameLoads(t testing.TB, want uint64, ref *replica, others ...*replica) []core.PartitionLoads {
	t.Helper()
	var got []core.PartitionLoads
	waitFor(t, syncTimeout, func() error {
		l, err := loads(ref)
		if err != nil {
			return err
		}
		if n := totalActive(l); n != want {
			return fmt.Errorf("%s has %d active requests, want %d", ref.id, n, want)
		}
		for _, o := range others {
			ol, err := loads(o)
			if err != nil {
				return err
			}
			if !equalLoads(l, ol) {
				return fmt.Errorf("%s /loads %+v differ from %s's %+v", o.id, ol, ref.id, l)
			}
		}
		got = l
		return nil
	})
	return got
}

// equalLoads compares two /loads answers.
func equalLoads(a, b []core.PartitionLoads) bool {
	return slices.EqualFunc(a, b, func(x, y core.PartitionLoads) bool {
		return x.ModelName == y.ModelName && x.RoutingGroup == y.RoutingGroup &&
			x.PendingCount == y.PendingCount && x.PendingISLTokens == y.PendingISLTokens &&
			slices.Equal(x.Loads, y.Loads)
	})
}

// waitMembers polls until r's /replica_sync/members lists exactly ids (sorted).
func waitMembers(t testing.TB, r *replica, ids ...string) []core.MemberInfo {
	t.Helper()
	var ms []core.MemberInfo
	want := slices.Sorted(slices.Values(ids))
	waitFor(t, syncTimeout, func() error {
		ms = nil
		if _, err := r.call("GET", "/replica_sync/members", nil, &ms); err != nil {
			return err
		}
		got := make([]string, 0, len(ms))
		for _, m := range ms {
			got = append(got, m.ReplicaID)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s members %v, want %v", r.id, got, want)
		}
		return nil
	})
	return ms
}

// stopGracefully sends SIGTERM and waits for the process to exit.
func (r *replica) stopGracefully(t testing.TB) {
	t.Helper()
	_ = r.p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.p.done:
	case <-time.After(poll.Generous):
		t.Fatalf("%s did not exit %v after SIGTERM", r.id, poll.Generous)
	}
}
