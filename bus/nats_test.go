package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvselect/kvselect/bus/natstest"
)

// Tests against real embedded nats-servers on 127.0.0.1.

func startEmbedded(t *testing.T, opts EmbeddedOptions) *Embedded {
	t.Helper()
	e, err := StartEmbedded(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	return e
}

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

// TestEmbeddedSingleNode: the default embedded server opens no socket and
// two replicas connected in process exchange events through it.
func TestEmbeddedSingleNode(t *testing.T) {
	e := startEmbedded(t, EmbeddedOptions{ServerName: "solo"})
	if e.ClientURL() != "" || e.Server().Addr() != nil || e.ClusterURL() != "" {
		t.Fatalf("single-node server listens: client %q addr %v cluster %q",
			e.ClientURL(), e.Server().Addr(), e.ClusterURL())
	}
	var sb sink
	a := newNATSRep(t, connect(t, ConnConfig{Name: "a", Embedded: e}), Config{ReplicaID: "a"})
	newNATSRep(t, connect(t, ConnConfig{Name: "b", Embedded: e}), sb.hook(Config{ReplicaID: "b", Peers: []string{"a"}}))
	a.PublishLifecycle(freeEvent("r1"))
	waitFor(t, func() error {
		if l := sb.lifecycles(); len(l) != 1 || l[0].RequestID != "r1" {
			return fmt.Errorf("b applied %+v", l)
		}
		return nil
	})
}

func TestEmbeddedOptionsRejected(t *testing.T) {
	tests := []struct {
		name string
		opts EmbeddedOptions
	}{
		{"listen without host", EmbeddedOptions{ListenAddr: ":4222"}},
		{"listen without port", EmbeddedOptions{ListenAddr: "127.0.0.1"}},
		{"listen bad port", EmbeddedOptions{ListenAddr: "127.0.0.1:99999"}},
		{"cluster without name", EmbeddedOptions{ClusterListen: "127.0.0.1:-1"}},
		{"routes without cluster", EmbeddedOptions{ClusterRoutes: []string{"127.0.0.1:6222"}}},
		{"name without cluster", EmbeddedOptions{ClusterName: "x"}},
		{"cluster without host", EmbeddedOptions{ClusterName: "x", ClusterListen: ":6222"}},
		{"bad route", EmbeddedOptions{ClusterName: "x", ClusterListen: "127.0.0.1:-1", ClusterRoutes: []string{"nats-route://"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := StartEmbedded(tt.opts)
			if !errors.Is(err, ErrEmbeddedOptions) {
				if e != nil {
					_ = e.Shutdown()
				}
				t.Fatalf("StartEmbedded = %v, want ErrEmbeddedOptions", err)
			}
		})
	}
}

// TestEmbeddedListenAndLog: an explicit listener works for external
// clients, the server logs through slog, and Shutdown is idempotent and
// closes clients.
func TestEmbeddedListenAndLog(t *testing.T) {
	h := &recordHandler{}
	e, err := StartEmbedded(EmbeddedOptions{ListenAddr: "127.0.0.1:0", Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.ClientURL(), "nats://127.0.0.1:") || strings.HasSuffix(e.ClientURL(), ":-1") {
		t.Fatalf("ClientURL %q", e.ClientURL())
	}
	var stats ConnStats
	nc := connect(t, ConnConfig{URLs: e.ClientURL(), Stats: &stats})
	waitFor(t, func() error {
		if !nc.IsConnected() {
			return errors.New("not connected")
		}
		return nil
	})
	if !h.sawComponent("nats-server") {
		t.Fatal("no server log record went through slog")
	}
	if err := e.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	waitFor(t, func() error {
		if stats.Disconnects.Load() == 0 {
			return errors.New("client did not notice the shutdown")
		}
		return nil
	})
}

type recordHandler struct {
	mu    sync.Mutex
	attrs []string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool { h.attrs = append(h.attrs, a.String()); return true })
	return nil
}
func (h *recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range as {
		h.attrs = append(h.attrs, a.String())
	}
	return h
}
func (h *recordHandler) WithGroup(string) slog.Handler { return h }
func (h *recordHandler) sawComponent(c string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.attrs {
		if a == "component="+c {
			return true
		}
	}
	return false
}

// TestEmbeddedClusterPropagates: three embedded servers form a NATS
// cluster; a lifecycle event published by a replica on one reaches the
// replicas on the other two.
func TestEmbeddedClusterPropagates(t *testing.T) {
	seed := startEmbedded(t, EmbeddedOptions{ServerName: "s0", ClusterName: "kv", ClusterListen: "127.0.0.1:0"})
	if seed.ClientURL() == "" {
		t.Fatal("clustered server must listen for clients (nats-server #5174)")
	}
	servers := []*Embedded{seed}
	for i := 1; i < 3; i++ {
		servers = append(servers, startEmbedded(t, EmbeddedOptions{ServerName: fmt.Sprint("s", i),
			ClusterName: "kv", ClusterListen: "127.0.0.1:0", ClusterRoutes: []string{seed.ClusterURL()}}))
	}
	waitFor(t, func() error {
		for i, s := range servers {
			if s.NumRoutes() < 2 {
				return fmt.Errorf("server %d has %d routes", i, s.NumRoutes())
			}
		}
		return nil
	})
	ids := []string{"tcp://a:1", "tcp://b:1", "tcp://c:1"}
	sinks := make([]*sink, 3)
	reps := make([]*Replicator, 3)
	for i, s := range servers {
		sinks[i] = &sink{}
		reps[i] = newNATSRep(t, connect(t, ConnConfig{Name: ids[i], Embedded: s}),
			sinks[i].hook(Config{ReplicaID: ids[i], Peers: ids}))
	}
	// Interest travels over routes asynchronously: wait until every server
	// counts the lifecycle subscribers of all three replicas.
	subj := reps[0].Subjects().LifecycleFrom(ids[0])
	for _, s := range servers {
		natstest.WaitInterestCount(t, s.Server(), subj, 3)
	}
	waitFor(t, func() error {
		for i, r := range reps {
			if n := len(r.Members()); n != 2 {
				return fmt.Errorf("replica %d sees %d members", i, n)
			}
		}
		return nil
	})
	reps[0].PublishLifecycle(freeEvent("from-a"))
	reps[2].PublishLifecycle(freeEvent("from-c"))
	for i, want := range [][]string{{"from-c"}, {"from-a", "from-c"}, {"from-a"}} {
		waitFor(t, func() error {
			var got []string
			for _, l := range sinks[i].lifecycles() {
				got = append(got, l.RequestID)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("replica %d applied %v, want %v", i, got, want)
			}
			return nil
		})
	}
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

func TestConnectConfigRejected(t *testing.T) {
	e := startEmbedded(t, EmbeddedOptions{})
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
