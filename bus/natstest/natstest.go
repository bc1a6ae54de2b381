package natstest

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/poll"
	"github.com/nats-io/nats-server/v2/server"
)

// ReadyTimeout bounds how long RunServer waits for a server to accept
// clients and RunCluster waits for routes to form.
const ReadyTimeout = poll.Generous

// DefaultOptions returns the options RunServer uses: 127.0.0.1, random
// client port, no monitoring port, NoSigs, NoLog, JetStream off. The
// result is fresh on every call; callers may modify it before passing it to
// RunServerWithOptions (options must not be reused after a server starts).
func DefaultOptions() *server.Options {
	return &server.Options{
		Host:     "127.0.0.1",
		Port:     -1,
		HTTPPort: 0,
		NoSigs:   true,
		NoLog:    true,
	}
}

// RunServer starts a server with DefaultOptions and shuts it down when the
// test ends. It fails the test if the server is not ready in time.
func RunServer(t testing.TB) *server.Server {
	t.Helper()
	return RunServerWithOptions(t, DefaultOptions())
}

// RunServerWithOptions starts a server with opts (which it takes ownership
// of) and registers its shutdown with t.Cleanup. Use it to restart a server
// on a known port: opts.Port = previous.Addr().(*net.TCPAddr).Port.
func RunServerWithOptions(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("natstest: new server: %v", err)
	}
	if os.Getenv("NATSTEST_LOG") != "" {
		s.SetLoggerV2(testLogger{t}, true, false, false)
	}
	go s.Start()
	if !s.ReadyForConnections(ReadyTimeout) {
		s.Shutdown()
		t.Fatalf("natstest: server not ready within %v", ReadyTimeout)
	}
	t.Cleanup(func() { Shutdown(s) })
	return s
}

// Shutdown stops s and waits for it. It is idempotent, so a test may stop
// a server early (to exercise reconnects) and still let Cleanup run.
func Shutdown(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// RunCluster starts n servers forming one NATS cluster named "natstest"
// (each with a random client and cluster port on 127.0.0.1, all routed to
// the first) and waits until every server has at least n-1 routes. Servers
// are shut down when the test ends.
func RunCluster(t testing.TB, n int) []*server.Server {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: cluster of %d servers", n)
	}
	servers := make([]*server.Server, 0, n)
	var seed []*url.URL
	for i := range n {
		opts := DefaultOptions()
		opts.ServerName = "natstest-" + strconv.Itoa(i)
		opts.Cluster = server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: -1}
		opts.Routes = seed
		s := RunServerWithOptions(t, opts)
		if i == 0 {
			seed = server.RoutesFromStr(fmt.Sprintf("nats-route://%s", s.ClusterAddr().String()))
		}
		servers = append(servers, s)
	}
	WaitFor(t, ReadyTimeout, func() error {
		for i, s := range servers {
			// Route pooling opens several routes per peer: wait for >=, never ==.
			if got := s.NumRoutes(); got < n-1 {
				return fmt.Errorf("server %d has %d routes, want >= %d", i, got, n-1)
			}
		}
		return nil
	})
	return servers
}

// WaitFor polls cond every few milliseconds until it returns nil or timeout
// passes; on timeout it fails the test with cond's last error.
func WaitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatalf("natstest: condition not met within %v: %v", timeout, err)
	}
}

// Poll is WaitFor without a testing.TB: it returns nil as soon as cond
// does, or cond's last error once timeout has passed (cond runs at least
// once). See poll.Poll.
func Poll(timeout time.Duration, cond func() error) error {
	return poll.Poll(timeout, poll.DefaultInterval, cond)
}

// WaitInterest waits until srv knows of at least one subscriber to subject
// in the global account: locally or across a route. Publish only after it
// returns, or the first messages may be lost while interest propagates.
func WaitInterest(t testing.TB, srv *server.Server, subject string) {
	t.Helper()
	WaitFor(t, ReadyTimeout, func() error {
		if !srv.GlobalAccount().SubscriptionInterest(subject) {
			return fmt.Errorf("server %s has no interest in %q", srv.Name(), subject)
		}
		return nil
	})
}

// WaitInterestCount waits until srv counts at least n subscriptions
// matching subject in the global account, local ones and those of remote
// servers learned over routes alike. Use it when one local subscriber
// would satisfy WaitInterest but the test needs the remote ones too.
func WaitInterestCount(t testing.TB, srv *server.Server, subject string, n int) {
	t.Helper()
	WaitFor(t, ReadyTimeout, func() error {
		if got := srv.GlobalAccount().Interest(subject); got < n {
			return fmt.Errorf("server %s has %d subscriptions on %q, want >= %d", srv.Name(), got, subject, n)
		}
		return nil
	})
}

// testLogger routes server logs to the test log.
type testLogger struct{ t testing.TB }

func (l testLogger) Noticef(f string, v ...any) { l.t.Logf("[nats INF] "+f, v...) }
func (l testLogger) Warnf(f string, v ...any)   { l.t.Logf("[nats WRN] "+f, v...) }
func (l testLogger) Fatalf(f string, v ...any)  { l.t.Logf("[nats FTL] "+f, v...) }
func (l testLogger) Errorf(f string, v ...any)  { l.t.Logf("[nats ERR] "+f, v...) }
func (l testLogger) Debugf(f string, v ...any)  { l.t.Logf("[nats DBG] "+f, v...) }
func (l testLogger) Tracef(f string, v ...any)  { l.t.Logf("[nats TRC] "+f, v...) }
