package natstest

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestRunServer(t *testing.T) {
	s := RunServer(t)
	addr, ok := s.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() || addr.Port <= 0 {
		t.Fatalf("server address %v, want 127.0.0.1:<random>", s.Addr())
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownIdempotent: a test may stop a server itself; Cleanup's
// second Shutdown must then be harmless.
func TestShutdownIdempotent(t *testing.T) {
	s := RunServer(t)
	Shutdown(s)
	Shutdown(s)
	if s.Running() {
		t.Fatal("server still running")
	}
}

func TestRunClusterAndInterest(t *testing.T) {
	servers := RunCluster(t, 3)
	if len(servers) != 3 {
		t.Fatalf("%d servers", len(servers))
	}
	for i, s := range servers {
		if s.NumRoutes() < 2 {
			t.Fatalf("server %d: %d routes", i, s.NumRoutes())
		}
	}
	sub, err := nats.Connect(servers[2].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got := make(chan string, 1)
	if _, err := sub.Subscribe("x.y", func(m *nats.Msg) { got <- string(m.Data) }); err != nil {
		t.Fatal(err)
	}
	WaitInterest(t, servers[0], "x.y")
	WaitInterestCount(t, servers[1], "x.y", 1) // learned over a route
	if n := servers[2].GlobalAccount().Interest("x.y"); n != 1 {
		t.Fatalf("local interest count %d, want 1", n)
	}
	pub, err := nats.Connect(servers[0].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish("x.y", []byte("across")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m != "across" {
			t.Fatalf("got %q", m)
		}
	case <-time.After(ReadyTimeout):
		t.Fatal("message did not cross the route")
	}
}

func TestPoll(t *testing.T) {
	calls := 0
	if err := Poll(time.Second, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("Poll = %v after %d calls", err, calls)
	}
	start := time.Now()
	err := Poll(30*time.Millisecond, func() error { return errors.New("never") })
	if err == nil || err.Error() != "never" {
		t.Fatalf("Poll = %v, want the condition's last error", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("gave up after %v", d)
	}
}

// fakeTB records Fatalf instead of stopping, to test WaitFor's failure path.
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = fmt.Sprintf(format, args...)
	f.mu.Unlock()
}

func TestWaitForFailsWithLastError(t *testing.T) {
	f := &fakeTB{TB: t}
	WaitFor(f, 20*time.Millisecond, func() error { return errors.New("still 3 of 5") })
	if !strings.Contains(f.failed, "still 3 of 5") {
		t.Fatalf("WaitFor failure message %q", f.failed)
	}
	ok := &fakeTB{TB: t}
	WaitFor(ok, time.Second, func() error { return nil })
	if ok.failed != "" {
		t.Fatalf("WaitFor failed on a true condition: %s", ok.failed)
	}
}
