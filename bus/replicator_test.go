package bus

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/kvwire"
)

const waitLong = 60 * time.Second // generous: a loaded CI machine (see internal/poll.Generous)

// sink records everything a Replicator's callbacks deliver, in order.
type sink struct {
	mu     sync.Mutex
	events []any // *Lifecycle, *Affinity, restart, MemberChange
}

// resyncFrom records a resync request from a peer.
type resyncFrom string

type restart struct {
	id         string
	prev, boot uint64
}

func (s *sink) add(v any) {
	s.mu.Lock()
	s.events = append(s.events, v)
	s.mu.Unlock()
}

func (s *sink) all() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

func (s *sink) lifecycles() []*Lifecycle {
	var out []*Lifecycle
	for _, e := range s.all() {
		if l, ok := e.(*Lifecycle); ok {
			out = append(out, l)
		}
	}
	return out
}

func (s *sink) changes() []MemberChange {
	var out []MemberChange
	for _, e := range s.all() {
		if c, ok := e.(MemberChange); ok {
			out = append(out, c)
		}
	}
	return out
}

// hook sets the callbacks of cfg to record into s.
func (s *sink) hook(cfg Config) Config {
	cfg.OnLifecycle = func(ev *Lifecycle) { s.add(ev) }
	cfg.OnLiveSet = func(ls *LiveSet) { s.add(ls) }
	cfg.OnResyncRequest = func(from string) { s.add(resyncFrom(from)) }
	cfg.OnAffinity = func(a *Affinity) { s.add(a) }
	cfg.OnPeerRestart = func(id string, prev, boot uint64) { s.add(restart{id, prev, boot}) }
	cfg.OnMemberChange = func(c MemberChange) { s.add(c) }
	return cfg
}

func waitFor(t *testing.T, cond func() error) {
	t.Helper()
	natstest.WaitFor(t, waitLong, cond)
}

func newRep(t *testing.T, tr Transport, cfg Config) *Replicator {
	t.Helper()
	if cfg.Cluster == "" {
		cfg.Cluster = "test"
	}
	r, err := NewWithTransport(cfg, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func freeEvent(req string) *Lifecycle {
	return &Lifecycle{Model: "m", Group: "g", BlockSize: 16, RequestID: req, Owner: kvwire.Owner{Worker: 1}, Kind: LifecycleFree}
}

func TestReplicatorDeliversBetweenPeers(t *testing.T) {
	n := NewMemNetwork()
	var sa, sb sink
	a := newRep(t, n.Connect(), sa.hook(Config{ReplicaID: "tcp://a:1", Peers: []string{"tcp://b:1"}}))
	b := newRep(t, n.Connect(), sb.hook(Config{ReplicaID: "tcp://b:1", Peers: []string{"tcp://a:1"}}))

	add := &Lifecycle{Model: "m", Group: "g", BlockSize: 16, RequestID: "r1", Owner: kvwire.Owner{Worker: 3, Rank: 1},
		Kind: LifecycleAdd, Add: &AddData{TokenSequence: []uint64{1, 2}, TrackPrefill: true, ISL: 32}}
	a.PublishLifecycle(add)
	a.PublishAffinity(&Affinity{Model: "m", SessionID: "s", Owner: kvwire.Owner{Worker: 3}, Sequence: 1, Writer: 9})
	waitFor(t, func() error {
		if len(sb.all()) < 3 { // A's join, the lifecycle event, the affinity binding
			return fmt.Errorf("b saw %v", sb.all())
		}
		return nil
	})
	got := sb.lifecycles()
	if len(got) != 1 || got[0].Sender != "tcp://a:1" || got[0].BootID != a.BootID() ||
		got[0].RequestID != "r1" || got[0].Add == nil || !slices.Equal(got[0].Add.TokenSequence, []uint64{1, 2}) {
		t.Fatalf("b received %+v", got)
	}
	// A hears its own messages back (MemNetwork echoes, like NATS without
	// NoEcho) and must drop them.
	waitFor(t, func() error {
		if st := a.Stats(); st.Lifecycle.Echoes != 1 || st.Affinity.Echoes != 1 {
			return fmt.Errorf("a stats %+v", st)
		}
		return nil
	})
	if l := sa.lifecycles(); len(l) != 0 {
		t.Fatalf("a applied its own event: %+v", l)
	}
	st := a.Stats()
	if st.Lifecycle.Published != 1 || st.Affinity.Published != 1 || st.Heartbeats.Published < 1 {
		t.Fatalf("a stats %+v", st)
	}
	if bs := b.Stats(); bs.Lifecycle.Received != 1 || bs.Affinity.Received != 1 {
		t.Fatalf("b stats %+v", bs)
	}
}

// TestLiveSetsKeepLifecycleOrder: live sets travel on the lifecycle subject and reach the
// peer's OnLiveSet in publication order with lifecycle events, under the same peer filter.
func TestLiveSetsKeepLifecycleOrder(t *testing.T) {
	n := NewMemNetwork()
	var sb, sc sink
	a := newRep(t, n.Connect(), Config{ReplicaID: "tcp://a:1", Peers: []string{"tcp://b:1"}})
	newRep(t, n.Connect(), sb.hook(Config{ReplicaID: "tcp://b:1", Peers: []string{"tcp://a:1"}}))
	c := newRep(t, n.Connect(), sc.hook(Config{ReplicaID: "tcp://c:1"})) // a is not c's peer

	a.PublishLifecycle(freeEvent("r1"))
	a.PublishLiveSet(&LiveSet{Model: "m", Group: "g", SetID: 5, Chunk: 0, Chunks: 2, IDs: []string{"r2"}})
	a.PublishLiveSet(&LiveSet{Model: "m", Group: "g", SetID: 5, Chunk: 1, Chunks: 2, IDs: []string{"r3"}})
	a.PublishLifecycle(freeEvent("r4"))
	var order []string
	waitFor(t, func() error {
		order = order[:0]
		for _, e := range sb.all() {
			switch v := e.(type) {
			case *Lifecycle:
				order = append(order, v.RequestID)
			case *LiveSet:
				if v.Sender != "tcp://a:1" || v.BootID != a.BootID() {
					return fmt.Errorf("live set origin %q/%d", v.Sender, v.BootID)
				}
				order = append(order, fmt.Sprintf("set%d/%d:%v", v.Chunk, v.Chunks, v.IDs))
			}
		}
		if len(order) < 4 {
			return fmt.Errorf("b saw %v", order)
		}
		return nil
	})
	if want := []string{"r1", "set0/2:[r2]", "set1/2:[r3]", "r4"}; !slices.Equal(order, want) {
		t.Fatalf("delivery order %v, want %v", order, want)
	}
	if st := a.Stats(); st.Lifecycle.Published != 4 {
		t.Fatalf("live sets count with the lifecycle stream: %+v", st.Lifecycle)
	}
	waitFor(t, func() error {
		if st := c.Stats(); st.Lifecycle.NotPeer != 4 {
			return fmt.Errorf("c dropped %d non-peer messages, want 4", st.Lifecycle.NotPeer)
		}
		return nil
	})
	for _, e := range sc.all() {
		if _, ok := e.(*LiveSet); ok {
			t.Fatal("a non-peer's live set was delivered")
		}
	}
}

// TestResyncRequestReachesItsTargetOnly: a resync request is delivered to the replica it names,
// when the requester is its peer, and to nobody else.
func TestResyncRequestReachesItsTargetOnly(t *testing.T) {
	n := NewMemNetwork()
	var sa, sc sink
	newRep(t, n.Connect(), sa.hook(Config{ReplicaID: "tcp://a:1", Peers: []string{"tcp://b:1"}}))
	b := newRep(t, n.Connect(), Config{ReplicaID: "tcp://b:1", Peers: []string{"tcp://a:1", "tcp://c:1"}})
	c := newRep(t, n.Connect(), sc.hook(Config{ReplicaID: "tcp://c:1"})) // b is not c's peer
	b.PublishResyncRequest("tcp://a:1")
	b.PublishResyncRequest("tcp://c:1")
	waitFor(t, func() error {
		for _, e := range sa.all() {
			if e == resyncFrom("tcp://b:1") {
				return nil
			}
		}
		return fmt.Errorf("a saw %v", sa.all())
	})
	waitFor(t, func() error {
		if st := c.Stats(); st.Lifecycle.NotPeer == 0 {
			return errors.New("c has not refused b's request yet")
		}
		return nil
	})
	for _, e := range append(sa.all(), sc.all()...) {
		if r, ok := e.(resyncFrom); ok && r != "tcp://b:1" {
			t.Fatalf("unexpected request %v", r)
		}
	}
	for _, e := range sc.all() {
		if _, ok := e.(resyncFrom); ok {
			t.Fatal("a request from a non-peer was delivered")
		}
	}
	n2 := 0
	for _, e := range sa.all() {
		if _, ok := e.(resyncFrom); ok {
			n2++
		}
	}
	if n2 != 1 {
		t.Fatalf("a got %d requests, want only the one addressed to it", n2)
	}
}

func TestReplicatorAppliesOnlyPeers(t *testing.T) {
	n := NewMemNetwork()
	var sb sink
	a := newRep(t, n.Connect(), Config{ReplicaID: "a"})
	b := newRep(t, n.Connect(), sb.hook(Config{ReplicaID: "b"})) // no peers

	a.PublishLifecycle(freeEvent("r1"))
	waitFor(t, func() error {
		if np := b.Stats().Lifecycle.NotPeer; np != 1 {
			return fmt.Errorf("NotPeer = %d", np)
		}
		return nil
	})
	if !b.AddPeer("a") {
		t.Fatal("AddPeer(a) = false")
	}
	a.PublishLifecycle(freeEvent("r2"))
	waitFor(t, func() error {
		if l := sb.lifecycles(); len(l) != 1 || l[0].RequestID != "r2" {
			return fmt.Errorf("lifecycles %+v", l)
		}
		return nil
	})
	if !b.RemovePeer("a") {
		t.Fatal("RemovePeer(a) = false")
	}
	a.PublishLifecycle(freeEvent("r3"))
	waitFor(t, func() error {
		if np := b.Stats().Lifecycle.NotPeer; np != 2 {
			return fmt.Errorf("NotPeer = %d", np)
		}
		return nil
	})
	if l := sb.lifecycles(); len(l) != 1 {
		t.Fatalf("event from removed peer applied: %+v", l)
	}
}

func TestReplicatorPeerSet(t *testing.T) {
	r := newRep(t, NewMemNetwork().Connect(), Config{ReplicaID: "me", Peers: []string{"z", "me", "a"}})
	tests := []struct {
		op   string
		id   string
		want bool
	}{
		{"add", "m", true},
		{"add", "m", false},  // already present
		{"add", "me", false}, // never our own peer
		{"add", "", false},   // invalid id
		{"add", "tcp://x:9", true},
		{"remove", "a", true},
		{"remove", "a", false}, // already gone
		{"remove", "nope", false},
	}
	for _, tt := range tests {
		var got bool
		if tt.op == "add" {
			got = r.AddPeer(tt.id)
		} else {
			got = r.RemovePeer(tt.id)
		}
		if got != tt.want {
			t.Fatalf("%s(%q) = %v, want %v", tt.op, tt.id, got, tt.want)
		}
	}
	if got, want := r.Peers(), []string{"m", "tcp://x:9", "z"}; !slices.Equal(got, want) {
		t.Fatalf("Peers = %v, want %v", got, want)
	}
	if st := r.Stats(); st.Peers != 3 {
		t.Fatalf("Stats.Peers = %d", st.Peers)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tr := NewMemNetwork().Connect()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no cluster", Config{ReplicaID: "a"}},
		{"cluster with dot", Config{Cluster: "a.b", ReplicaID: "a"}},
		{"cluster with wildcard", Config{Cluster: "*", ReplicaID: "a"}},
		{"no replica id", Config{Cluster: "c"}},
		{"empty peer", Config{Cluster: "c", ReplicaID: "a", Peers: []string{""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, err := NewWithTransport(tt.cfg, tr, nil); !errors.Is(err, ErrConfig) {
				if r != nil {
					_ = r.Close()
				}
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
	if _, err := New(Config{Cluster: "c", ReplicaID: "a"}, nil, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("nil conn: %v", err)
	}
}

// gatedTransport blocks Publish on subject while the gate is closed, to
// stall a Replicator's publisher goroutine.
type gatedTransport struct {
	Transport
	subject string
	gate    chan struct{}
}

func (g *gatedTransport) Publish(subject string, data []byte) error {
	if subject == g.subject {
		<-g.gate
	}
	return g.Transport.Publish(subject, data)
}

// TestPublishNeverBlocks: with the publisher stalled in the transport, the
// caller still returns at once and overflow is counted, not waited on.
func TestPublishNeverBlocks(t *testing.T) {
	n := NewMemNetwork()
	subj, _ := NewSubjects("test")
	g := &gatedTransport{Transport: n.Connect(), subject: subj.LifecycleFrom("a"), gate: make(chan struct{})}
	a := newRep(t, g, Config{ReplicaID: "a", OutboundQueue: 4})
	var sb sink
	newRep(t, n.Connect(), sb.hook(Config{ReplicaID: "b", Peers: []string{"a"}}))

	const total = 100
	for i := range total {
		a.PublishLifecycle(freeEvent(fmt.Sprint(i))) // would deadlock the test if it blocked
	}
	// The publisher holds at most one event inside Publish plus 4 queued.
	if d := a.Stats().Lifecycle.OutboundDropped; d < total-5 {
		t.Fatalf("OutboundDropped = %d, want >= %d", d, total-5)
	}
	close(g.gate)
	waitFor(t, func() error {
		st := a.Stats().Lifecycle
		if st.Published+st.OutboundDropped != total {
			return fmt.Errorf("published %d + dropped %d != %d", st.Published, st.OutboundDropped, total)
		}
		return nil
	})
	waitFor(t, func() error {
		if got, want := len(sb.lifecycles()), int(a.Stats().Lifecycle.Published); got != want {
			return fmt.Errorf("b applied %d of %d", got, want)
		}
		return nil
	})
}

// TestInboundQueueDropsWhenFull: a stuck callback makes the bounded inbound
// queue overflow; the transport goroutine never waits for it.
func TestInboundQueueDropsWhenFull(t *testing.T) {
	n := NewMemNetwork()
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	a := newRep(t, n.Connect(), Config{ReplicaID: "a"})
	b := newRep(t, n.Connect(), Config{ReplicaID: "b", Peers: []string{"a"}, LifecycleQueue: 3,
		OnLifecycle: func(*Lifecycle) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-gate
		}})
	a.PublishLifecycle(freeEvent("first"))
	<-entered // the dispatcher is now stuck in the callback
	const more = 20
	for i := range more {
		a.PublishLifecycle(freeEvent(fmt.Sprint(i)))
	}
	waitFor(t, func() error {
		st := b.Stats().Lifecycle
		if st.Received+st.InboundDropped != more+1 {
			return fmt.Errorf("received %d + dropped %d != %d", st.Received, st.InboundDropped, more+1)
		}
		return nil
	})
	// The join notice may take one slot; 1 in the callback + at most 3 queued.
	if st := b.Stats().Lifecycle; st.Received > 4 || st.InboundDropped < more-3 {
		t.Fatalf("stats %+v", st)
	}
	close(gate)
}

func TestPublishErrorsCountedAndRecover(t *testing.T) {
	n := NewMemNetwork()
	ta := n.Connect()
	var sb sink
	a := newRep(t, ta, Config{ReplicaID: "a"})
	newRep(t, n.Connect(), sb.hook(Config{ReplicaID: "b", Peers: []string{"a"}}))
	ta.SetDown(true)
	a.PublishLifecycle(freeEvent("lost"))
	waitFor(t, func() error {
		if e := a.Stats().Lifecycle.PublishErrors; e != 1 {
			return fmt.Errorf("PublishErrors = %d", e)
		}
		return nil
	})
	ta.SetDown(false)
	a.PublishLifecycle(freeEvent("kept"))
	waitFor(t, func() error {
		if l := sb.lifecycles(); len(l) != 1 || l[0].RequestID != "kept" {
			return fmt.Errorf("b applied %+v", l)
		}
		return nil
	})
}
