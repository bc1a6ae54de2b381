package bus

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// MemNetwork is an in-memory message bus: a hand-written fake of a NATS
// server for tests of code built on [Transport] (memberlist's MockNetwork
// pattern). Endpoints made by [MemNetwork.Connect] see each other's
// messages; like a NATS connection without NoEcho, an endpoint also
// receives its own publishes.
//
// It is safe for concurrent use and needs no cleanup beyond closing its
// endpoints (each subscription owns one goroutine until unsubscribed).
// It works inside a testing/synctest bubble when created there.
//
// Lock order: MemNetwork.mu before MemTransport.mu (deliver checks an
// endpoint's state while holding the network lock); never the reverse.
type MemNetwork struct {
	mu    sync.Mutex
	subs  map[string]map[*memSub]struct{} // guarded by mu; exact subjects
	wild  map[string]map[*memSub]struct{} // guarded by mu; patterns with '*' or '>'
	inbox atomic.Uint64                   // request inbox counter

	// PendingLimit is the per-subscription queue length; a delivery to a
	// full queue is dropped and counted (client-side slow consumer). Set it
	// before subscribing; 0 means 65536.
	PendingLimit int
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork {
	return &MemNetwork{subs: make(map[string]map[*memSub]struct{}), wild: make(map[string]map[*memSub]struct{})}
}

// Connect returns a new endpoint on the network.
func (n *MemNetwork) Connect() *MemTransport {
	return &MemTransport{net: n, subs: make(map[*memSub]struct{})}
}

// MemTransport is one endpoint of a [MemNetwork]; it implements [Transport].
type MemTransport struct {
	net *MemNetwork

	mu     sync.Mutex
	closed bool                 // guarded by mu
	down   bool                 // guarded by mu; simulated disconnect
	subs   map[*memSub]struct{} // guarded by mu; this endpoint's subscriptions
}

var _ Transport = (*MemTransport)(nil)

// SetDown simulates losing (true) or regaining (false) the connection.
// While down, Publish and Request fail with [ErrDisconnected] and messages
// for this endpoint's subscriptions are lost; subscriptions survive, as
// NATS re-sends them on reconnect.
func (t *MemTransport) SetDown(down bool) {
	t.mu.Lock()
	t.down = down
	t.mu.Unlock()
}

// Close unsubscribes everything; later calls fail with [ErrClosed].
func (t *MemTransport) Close() {
	t.mu.Lock()
	t.closed = true
	subs := t.subs
	t.subs = map[*memSub]struct{}{}
	t.mu.Unlock()
	for s := range subs {
		_ = s.Unsubscribe()
	}
}

// state reports whether the endpoint can send: nil, ErrClosed or ErrDisconnected.
func (t *MemTransport) state() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return ErrClosed
	case t.down:
		return ErrDisconnected
	}
	return nil
}

// Publish implements [Transport]: each subscriber gets its own copy, queued
// without blocking.
func (t *MemTransport) Publish(subject string, data []byte) error {
	if err := t.state(); err != nil {
		return fmt.Errorf("bus: publish %s: %w", subject, err)
	}
	t.net.deliver(Msg{Subject: subject, Data: data})
	return nil
}

// deliver fans m out and reports how many subscriptions it reached.
func (n *MemNetwork) deliver(m Msg) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	reached := 0
	targets := n.subs[m.Subject]
	if len(n.wild) > 0 {
		all := make(map[*memSub]struct{}, len(targets))
		for s := range targets {
			all[s] = struct{}{}
		}
		for pat, set := range n.wild {
			if MatchSubject(pat, m.Subject) {
				for s := range set {
					all[s] = struct{}{}
				}
			}
		}
		targets = all
	}
	for s := range targets {
		if s.owner.isDown() {
			continue
		}
		reached++
		c := m
		c.Data = bytes.Clone(m.Data)
		if c.Data == nil {
			c.Data = []byte{}
		}
		select {
		case s.ch <- c:
		default:
			s.dropped.Add(1)
		}
	}
	return reached
}

// Connected implements [ConnectionState]: false while SetDown(true) or after Close.
func (t *MemTransport) Connected() bool { return t.state() == nil }

func (t *MemTransport) isDown() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.down
}

// Subscribe implements [Transport]; the handler runs on a goroutine owned
// by the subscription.
func (t *MemTransport) Subscribe(subject string, h Handler) (Subscription, error) {
	limit := orDefault(t.net.PendingLimit, 1<<16)
	s := &memSub{owner: t, subject: subject, ch: make(chan Msg, limit), done: make(chan struct{})}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, fmt.Errorf("bus: subscribe %s: %w", subject, ErrClosed)
	}
	t.subs[s] = struct{}{}
	t.mu.Unlock()

	t.net.mu.Lock()
	table := t.net.table(subject)
	set := table[subject]
	if set == nil {
		set = make(map[*memSub]struct{})
		table[subject] = set
	}
	set[s] = struct{}{}
	t.net.mu.Unlock()

	go s.run(h)
	return s, nil
}

// Request implements [Transport] with a one-shot inbox subscription.
func (t *MemTransport) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	if err := t.state(); err != nil {
		return nil, fmt.Errorf("bus: request %s: %w", subject, err)
	}
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	inbox := "_INBOX.mem." + strconv.FormatUint(t.net.inbox.Add(1), 10)
	replies := make(chan []byte, 1)
	sub, err := t.Subscribe(inbox, func(m Msg) {
		select {
		case replies <- m.Data:
		default: // only the first reply counts
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if t.net.deliver(Msg{Subject: subject, Reply: inbox, Data: data}) == 0 {
		return nil, fmt.Errorf("bus: request %s: %w", subject, ErrNoResponders)
	}
	select {
	case b := <-replies:
		return b, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("bus: request %s: %w: %w", subject, ErrTimeout, ctx.Err())
	}
}

// Flush implements [Transport]. Subscriptions take effect synchronously in
// memory, so there is nothing to wait for beyond the endpoint's state.
func (t *MemTransport) Flush(ctx context.Context) error {
	if err := t.state(); err != nil {
		return fmt.Errorf("bus: flush: %w", err)
	}
	return ctx.Err()
}

// memSub is one subscription: a bounded queue drained by one goroutine.
type memSub struct {
	owner   *MemTransport
	subject string
	ch      chan Msg
	done    chan struct{} // closed by Unsubscribe
	once    sync.Once
	dropped atomic.Int64
}

func (s *memSub) run(h Handler) {
	for {
		select {
		case <-s.done:
			return
		case m := <-s.ch:
			// Re-check: Unsubscribe may have raced with a queued message.
			select {
			case <-s.done:
				return
			default:
			}
			h(m)
		}
	}
}

// Unsubscribe implements [Subscription].
func (s *memSub) Unsubscribe() error {
	err := fmt.Errorf("bus: unsubscribe %s: %w", s.subject, ErrClosed)
	s.once.Do(func() {
		err = nil
		n := s.owner.net
		n.mu.Lock()
		table := n.table(s.subject)
		delete(table[s.subject], s)
		if len(table[s.subject]) == 0 {
			delete(table, s.subject)
		}
		n.mu.Unlock()
		s.owner.mu.Lock()
		delete(s.owner.subs, s)
		s.owner.mu.Unlock()
		close(s.done)
	})
	return err
}

// Dropped implements [Subscription].
func (s *memSub) Dropped() int { return int(s.dropped.Load()) }

// table returns the subscription map subject belongs in. n.mu held.
func (n *MemNetwork) table(subject string) map[string]map[*memSub]struct{} {
	if strings.ContainsAny(subject, "*>") {
		return n.wild
	}
	return n.subs
}

// MatchSubject reports whether subject matches pattern with NATS wildcard rules: '*' matches
// exactly one token, a final '>' one or more tokens.
func MatchSubject(pattern, subject string) bool {
	for {
		pi := strings.IndexByte(pattern, '.')
		si := strings.IndexByte(subject, '.')
		ptok, stok := pattern, subject
		if pi >= 0 {
			ptok = pattern[:pi]
		}
		if si >= 0 {
			stok = subject[:si]
		}
		if ptok == ">" {
			return pi < 0 && stok != ""
		}
		if stok == "" || (ptok != "*" && ptok != stok) {
			return false
		}
		if pi < 0 || si < 0 {
			return pi < 0 && si < 0
		}
		pattern, subject = pattern[pi+1:], subject[si+1:]
	}
}
