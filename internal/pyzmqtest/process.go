package pyzmqtest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Process is one running Python publisher script driven over a line protocol: each command is
// one stdin line, each answer one stdout line ("OK ..." on success), and the script's first line
// is "READY <pub endpoint> <replay endpoint or ->". bus/kvlisten/testdata/vllm_publisher.py
// speaks it; its docstring lists the commands.
//
// Ownership: the test goroutine owns a Process; commands are strictly request/reply, so only one
// goroutine may call Do. Stop is registered with t.Cleanup and is idempotent.
type Process struct {
	t        testing.TB
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	lines    chan string
	timeout  time.Duration
	stopOnce sync.Once

	// PubEP is the tcp://127.0.0.1:port endpoint the script's PUB socket is bound to.
	PubEP string
	// ReplayEP is its replay ROUTER endpoint, "" when it runs without one.
	ReplayEP string
}

// Start launches py script args... and waits for its READY line. timeout bounds every wait
// for an answer (generous on shared CI cores). The script's stderr goes to the test's stderr.
func Start(t testing.TB, py, script string, timeout time.Duration, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(py, append([]string{script}, args...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 16), timeout: timeout}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(p.Stop)
	ready := p.read()
	f := strings.Fields(ready)
	if len(f) != 3 || f[0] != "READY" {
		t.Fatalf("publisher said %q", ready)
	}
	p.PubEP, p.ReplayEP = f[1], f[2]
	if p.ReplayEP == "-" {
		p.ReplayEP = ""
	}
	return p
}

// read returns the script's next stdout line. The script answers every command with exactly
// one line, so a reply can never be confused with another command's.
func (p *Process) read() string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatal("publisher exited")
		}
		return l
	case <-time.After(p.timeout):
		p.t.Fatalf("publisher did not answer within %v", p.timeout)
	}
	return ""
}

// Do sends one command line and returns the text after "OK"; any other answer fails the test.
func (p *Process) Do(line string) string {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write command: %v", err)
	}
	r := p.read()
	if !strings.HasPrefix(r, "OK") {
		p.t.Fatalf("command %.200q: %s", line, r)
	}
	return strings.TrimSpace(strings.TrimPrefix(r, "OK"))
}

// Stop closes stdin (the script exits on EOF, closing its sockets with linger 0) and reaps the
// process, killing it if it has not exited within 5 s.
func (p *Process) Stop() {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	})
}
