package bus

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvselect/kvselect/bus/natstest"
)

// Tests against real nats-servers on 127.0.0.1 (bus/natstest); the embedded server is tested
// in bus/natsembed.

func connect(t *testing.T, cfg ConnConfig) *nats.Conn {
	t.Helper()
	nc, err := Connect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func newNATSRep(t *testing.T, nc *nats.Conn, cfg Config) *Replicator {
	t.Helper()
	if cfg.Cluster == "" {
		cfg.Cluster = "it"
	}
	r, err := New(cfg, nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestReconnectResumes: the server dies; publishing fails fast and is
// counted; the server comes back on the same port and delivery resumes
// through the same Replicators.
func TestReconnectResumes(t *testing.T) {
	opts := natstest.DefaultOptions()
	srv := natstest.RunServerWithOptions(t, opts)
	port := srv.Addr().(*net.TCPAddr).Port
	url := srv.ClientURL()
	var statsA, statsB ConnStats
	ncA := connect(t, ConnConfig{Name: "a", URLs: url, ReconnectWait: 20 * time.Millisecond, Stats: &statsA})
	ncB := connect(t, ConnConfig{Name: "b", URLs: url, ReconnectWait: 20 * time.Millisecond, Stats: &statsB})
	a := newNATSRep(t, ncA, Config{ReplicaID: "a"})
	var sb sink
	newNATSRep(t, ncB, sb.hook(Config{ReplicaID: "b", Peers: []string{"a"}}))
	natstest.WaitInterest(t, srv, a.Subjects().LifecycleFrom("a"))
	a.PublishLifecycle(freeEvent("before"))
	waitFor(t, func() error {
		if len(sb.lifecycles()) != 1 {
			return errors.New("first event not delivered")
		}
		return nil
	})

	natstest.Shutdown(srv)
	waitFor(t, func() error {
		if ncA.IsConnected() {
			return errors.New("a still connected")
		}
		return nil
	})
	start := time.Now()
	for range 10 {
		a.PublishLifecycle(freeEvent("during")) // must not block
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("publishing during the outage blocked for %v", d)
	}
	waitFor(t, func() error {
		if e := a.Stats().Lifecycle.PublishErrors; e < 10 {
			return fmt.Errorf("PublishErrors = %d", e)
		}
		return nil
	})

	opts2 := natstest.DefaultOptions()
	opts2.Port = port
	srv2 := natstest.RunServerWithOptions(t, opts2)
	// The reconnect handler (which counts) runs on nats.go's callback goroutine after the
	// connection is back, so poll for the counters too.
	waitFor(t, func() error {
		if !ncA.IsConnected() || !ncB.IsConnected() {
			return errors.New("not reconnected yet")
		}
		if statsA.Reconnects.Load() == 0 || statsB.Reconnects.Load() == 0 {
			return fmt.Errorf("reconnects not counted: a %+v b %+v", statsA.Snapshot(), statsB.Snapshot())
		}
		return nil
	})
	// Server interest alone proves nothing here (a subscribes to the same
	// subject), and b's re-sent subscription races with a's first
	// publishes; events are best-effort, so keep publishing until one lands.
	_ = srv2
	waitFor(t, func() error {
		l := sb.lifecycles()
		if len(l) >= 2 && l[len(l)-1].RequestID == "after" {
			return nil
		}
		a.PublishLifecycle(freeEvent("after"))
		return fmt.Errorf("b applied %d events", len(l))
	})
	for _, l := range sb.lifecycles() {
		if l.RequestID == "during" {
			t.Fatal("an event published during the outage was replayed")
		}
	}
}

// stubServer is an InProcessServer that is never dialled (config validation fails first).
type stubServer struct{}

func (stubServer) InProcessConn() (net.Conn, error) { return nil, errors.New("stub") }
func (stubServer) ClientURL() string                { return "" }

func TestConnectConfigRejected(t *testing.T) {
	e := stubServer{}
	tests := []struct {
		name string
		cfg  ConnConfig
	}{
		{"nothing", ConnConfig{}},
		{"both", ConnConfig{URLs: "nats://127.0.0.1:4222", Embedded: e}},
		{"token and user", ConnConfig{URLs: "nats://x:1", Token: "t", User: "u"}},
		{"creds and token", ConnConfig{URLs: "nats://x:1", Token: "t", CredsFile: "/c"}},
		{"cert without key", ConnConfig{URLs: "nats://x:1", TLSCert: "/c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if nc, err := Connect(tt.cfg); !errors.Is(err, ErrConnConfig) {
				if nc != nil {
					nc.Close()
				}
				t.Fatalf("Connect = %v, want ErrConnConfig", err)
			}
		})
	}
}

// TestConnectBeforeServerIsUp: a replica may start before NATS; Connect
// returns a reconnecting connection that connects when the server appears.
func TestConnectBeforeServerIsUp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	var stats ConnStats
	nc := connect(t, ConnConfig{URLs: fmt.Sprintf("nats://127.0.0.1:%d", port),
		ReconnectWait: 20 * time.Millisecond, Stats: &stats})
	if nc.IsConnected() {
		t.Fatal("connected with no server")
	}
	opts := natstest.DefaultOptions()
	opts.Port = port
	natstest.RunServerWithOptions(t, opts)
	waitFor(t, func() error {
		if !nc.IsConnected() || stats.Connects.Load() != 1 {
			return fmt.Errorf("connected=%v stats=%+v", nc.IsConnected(), stats.Snapshot())
		}
		return nil
	})
}

func TestAuthAndRedaction(t *testing.T) {
	opts := natstest.DefaultOptions()
	opts.Username, opts.Password = "kv", "s3cret"
	srv := natstest.RunServerWithOptions(t, opts)
	nc := connect(t, ConnConfig{URLs: srv.ClientURL(), User: "kv", Password: "s3cret"})
	waitFor(t, func() error {
		if !nc.IsConnected() {
			return errors.New("not connected")
		}
		return nil
	})
	if got := redactURLs("nats://u:p@a:1,nats://b:2"); got != "nats://redacted@a:1,nats://b:2" {
		t.Fatalf("redactURLs = %q", got)
	}
}
