package natsembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/internal/logbuf"
	"github.com/kvselect/kvselect/internal/poll"
	"github.com/kvselect/kvselect/kvwire"
	"github.com/nats-io/nats.go"
)

// Tests against real embedded nats-servers on 127.0.0.1, with real bus replicators on top.

func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	e, err := Start(opts)
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

func connect(t *testing.T, cfg bus.ConnConfig) *nats.Conn {
	t.Helper()
	nc, err := bus.Connect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func newNATSRep(t *testing.T, nc *nats.Conn, cfg bus.Config) *bus.Replicator {
	t.Helper()
	if cfg.Cluster == "" {
		cfg.Cluster = "it"
	}
	r, err := bus.New(cfg, nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func waitFor(t *testing.T, cond func() error) {
	t.Helper()
	natstest.WaitFor(t, poll.Generous, cond)
}

// sink records the lifecycle events a replicator applies.
type sink struct {
	mu  sync.Mutex
	got []*bus.Lifecycle
}

// hook sets cfg's lifecycle callback to record into s.
func (s *sink) hook(cfg bus.Config) bus.Config {
	cfg.OnLifecycle = func(ev *bus.Lifecycle) {
		s.mu.Lock()
		s.got = append(s.got, ev)
		s.mu.Unlock()
	}
	return cfg
}

func (s *sink) lifecycles() []*bus.Lifecycle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func freeEvent(req string) *bus.Lifecycle {
	return &bus.Lifecycle{Model: "m", Group: "g", BlockSize: 16, RequestID: req, Owner: kvwire.Owner{Worker: 1}, Kind: bus.LifecycleFree}
}

// TestEmbeddedSingleNode: the default embedded server opens no socket and
// two replicas connected in process exchange events through it.
func TestEmbeddedSingleNode(t *testing.T) {
	e := startServer(t, Options{ServerName: "solo"})
	if e.ClientURL() != "" || e.Server().Addr() != nil || e.ClusterURL() != "" {
		t.Fatalf("single-node server listens: client %q addr %v cluster %q",
			e.ClientURL(), e.Server().Addr(), e.ClusterURL())
	}
	var sb sink
	a := newNATSRep(t, connect(t, bus.ConnConfig{Name: "a", Embedded: e}), bus.Config{ReplicaID: "a"})
	newNATSRep(t, connect(t, bus.ConnConfig{Name: "b", Embedded: e}), sb.hook(bus.Config{ReplicaID: "b", Peers: []string{"a"}}))
	a.PublishLifecycle(freeEvent("r1"))
	waitFor(t, func() error {
		if l := sb.lifecycles(); len(l) != 1 || l[0].RequestID != "r1" {
			return fmt.Errorf("b applied %+v", l)
		}
		return nil
	})
}

func TestOptionsRejected(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"listen without host", Options{ListenAddr: ":4222"}},
		{"listen without port", Options{ListenAddr: "127.0.0.1"}},
		{"listen bad port", Options{ListenAddr: "127.0.0.1:99999"}},
		{"cluster without name", Options{ClusterListen: "127.0.0.1:-1"}},
		{"routes without cluster", Options{ClusterRoutes: []string{"127.0.0.1:6222"}}},
		{"name without cluster", Options{ClusterName: "x"}},
		{"cluster without host", Options{ClusterName: "x", ClusterListen: ":6222"}},
		{"bad route", Options{ClusterName: "x", ClusterListen: "127.0.0.1:-1", ClusterRoutes: []string{"nats-route://"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Start(tt.opts)
			if !errors.Is(err, ErrOptions) {
				if e != nil {
					_ = e.Shutdown()
				}
				t.Fatalf("Start = %v, want ErrOptions", err)
			}
		})
	}
}

// TestEmbeddedListenAndLog: an explicit listener works for external
// clients, the server logs through slog, and Shutdown is idempotent and
// closes clients.
func TestEmbeddedListenAndLog(t *testing.T) {
	h := &recordHandler{}
	e, err := Start(Options{ListenAddr: "127.0.0.1:0", Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.ClientURL(), "nats://127.0.0.1:") || strings.HasSuffix(e.ClientURL(), ":-1") {
		t.Fatalf("ClientURL %q", e.ClientURL())
	}
	var stats bus.ConnStats
	nc := connect(t, bus.ConnConfig{URLs: e.ClientURL(), Stats: &stats})
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

// recordHandler keeps every record's attributes and message (safe for concurrent use).
type recordHandler struct {
	mu    sync.Mutex
	attrs []string
	msgs  []string
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
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

// countMessages returns how many recorded messages contain every one of parts.
func (h *recordHandler) countMessages(parts ...string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
next:
	for _, m := range h.msgs {
		for _, p := range parts {
			if !strings.Contains(m, p) {
				continue next
			}
		}
		n++
	}
	return n
}
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
	seed := startServer(t, Options{ServerName: "s0", ClusterName: "kv", ClusterListen: "127.0.0.1:0"})
	if seed.ClientURL() == "" {
		t.Fatal("clustered server must listen for clients (nats-server #5174)")
	}
	servers := []*Server{seed}
	for i := 1; i < 3; i++ {
		servers = append(servers, startServer(t, Options{ServerName: fmt.Sprint("s", i),
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
	reps := make([]*bus.Replicator, 3)
	for i, s := range servers {
		sinks[i] = &sink{}
		reps[i] = newNATSRep(t, connect(t, bus.ConnConfig{Name: ids[i], Embedded: s}),
			sinks[i].hook(bus.Config{ReplicaID: ids[i], Peers: ids}))
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

// TestConnectionLogsItsOwnURL: an in-process connection logs its own embedded server's client
// URL, not nats.go's default nats://127.0.0.1:4222 (which would name another replica's server on
// a shared host).
func TestConnectionLogsItsOwnURL(t *testing.T) {
	e, err := Start(Options{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Shutdown() })
	var buf logbuf.Buffer
	nc := connect(t, bus.ConnConfig{Embedded: e, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	waitFor(t, func() error {
		if !strings.Contains(buf.String(), "nats connected") {
			return errors.New("no connected line yet")
		}
		return nil
	})
	_ = nc
	s := buf.String()
	if !strings.Contains(s, "url=\"in-process "+e.ClientURL()+"\"") || strings.Contains(s, ":4222") {
		t.Fatalf("connected line does not name %s:\n%s", e.ClientURL(), s)
	}
}
