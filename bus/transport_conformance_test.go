package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus/natstest"
)

// The Transport conformance suite (slogtest/fstest pattern): one set of
// checks, run against every implementation. newPair returns two endpoints
// of one bus; they are closed by the factory's t.Cleanup.

const suiteWait = 60 * time.Second // generous: a loaded CI machine (see internal/poll.Generous)

// pair is two endpoints of one bus plus fault hooks for endpoint a:
// disconnect cuts a off from the bus (permanently, for the test), close
// closes a.
type pair struct {
	a, b       Transport
	disconnect func()
	close      func()
}

type pairFactory func(t *testing.T) pair

func TestTransportConformanceMem(t *testing.T) {
	runTransportConformance(t, func(t *testing.T) pair {
		n := NewMemNetwork()
		a, b := n.Connect(), n.Connect()
		t.Cleanup(func() { a.Close(); b.Close() })
		return pair{a: a, b: b, disconnect: func() { a.SetDown(true) }, close: a.Close}
	})
}

func TestTransportConformanceNATS(t *testing.T) {
	runTransportConformance(t, func(t *testing.T) pair {
		srv := natstest.RunServer(t)
		dial := func(name string) *NATSTransport {
			nc, err := Connect(ConnConfig{Name: name, URLs: srv.ClientURL()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			return NewNATSTransport(nc)
		}
		a, b := dial("a"), dial("b")
		return pair{a: a, b: b, disconnect: func() { natstest.Shutdown(srv) }, close: a.Conn().Close}
	})
}

// recorder collects messages delivered to a handler.
type recorder struct {
	mu   sync.Mutex
	msgs []Msg
}

func (r *recorder) handle(m Msg) {
	r.mu.Lock()
	r.msgs = append(r.msgs, m)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Msg(nil), r.msgs...)
}

func (r *recorder) waitN(t *testing.T, n int) []Msg {
	t.Helper()
	natstest.WaitFor(t, suiteWait, func() error {
		if got := len(r.snapshot()); got < n {
			return fmt.Errorf("%d of %d messages", got, n)
		}
		return nil
	})
	return r.snapshot()
}

func subscribe(t *testing.T, tr Transport, subject string, h Handler) Subscription {
	t.Helper()
	s, err := tr.Subscribe(subject, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func runTransportConformance(t *testing.T, newPair pairFactory) {
	t.Run("PublishDelivers", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		var r recorder
		subscribe(t, b, "s.one", r.handle)
		if err := a.Publish("s.one", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		got := r.waitN(t, 1)
		if got[0].Subject != "s.one" || string(got[0].Data) != "hello" || got[0].Reply != "" {
			t.Fatalf("got %+v", got[0])
		}
	})

	t.Run("WildcardSubscriptions", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		var star, tail, exact recorder
		subscribe(t, b, "w.kind.*", star.handle)
		subscribe(t, b, "w.>", tail.handle)
		subscribe(t, b, "w.kind.x", exact.handle)
		for _, s := range []string{"w.kind.x", "w.kind.y", "w.kind.y.z", "w.other"} {
			if err := a.Publish(s, []byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		// Fence: the last publish on every pattern arrives after the earlier ones (order per
		// subscription), so counts are final once it is seen.
		if err := a.Publish("w.kind.x", []byte("end")); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			r    *recorder
			want []string
		}{
			{&star, []string{"w.kind.x", "w.kind.y", "end"}},
			{&tail, []string{"w.kind.x", "w.kind.y", "w.kind.y.z", "w.other", "end"}},
			{&exact, []string{"w.kind.x", "end"}},
		} {
			got := c.r.waitN(t, len(c.want))
			if len(got) != len(c.want) {
				t.Fatalf("got %d messages, want %v", len(got), c.want)
			}
			for i, m := range got {
				if string(m.Data) != c.want[i] {
					t.Fatalf("got %q at %d, want %v", m.Data, i, c.want)
				}
			}
		}
	})

	t.Run("FanOutToEverySubscription", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		var r1, r2, r3 recorder
		subscribe(t, b, "s.fan", r1.handle)
		subscribe(t, b, "s.fan", r2.handle)
		subscribe(t, a, "s.fan", r3.handle)
		if err := a.Publish("s.fan", []byte("x")); err != nil {
			t.Fatal(err)
		}
		for i, r := range []*recorder{&r1, &r2, &r3} {
			if got := r.waitN(t, 1); string(got[0].Data) != "x" {
				t.Fatalf("subscription %d got %q", i, got[0].Data)
			}
		}
	})

	t.Run("PublishWithoutSubscribersSucceeds", func(t *testing.T) {
		a := newPair(t).a
		if err := a.Publish("s.nobody", []byte("lost")); err != nil {
			t.Fatalf("publish with no interest: %v", err)
		}
	})

	t.Run("OrderPerSubscription", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		var r recorder
		subscribe(t, b, "s.order", r.handle)
		const n = 2000
		for i := range n {
			if err := a.Publish("s.order", []byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
		for i, m := range r.waitN(t, n) {
			if string(m.Data) != strconv.Itoa(i) {
				t.Fatalf("message %d is %q", i, m.Data)
			}
		}
	})

	t.Run("PrivateCopies", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		var r1, r2 recorder
		subscribe(t, b, "s.copy", func(m Msg) {
			m.Data[0] = 'X' // the handler owns its copy and may scribble on it
			r1.handle(m)
		})
		subscribe(t, b, "s.copy", r2.handle)
		buf := []byte("abc")
		if err := a.Publish("s.copy", buf); err != nil {
			t.Fatal(err)
		}
		copy(buf, "zzz") // the publisher may reuse its buffer at once
		r1.waitN(t, 1)
		if got := r2.waitN(t, 1); string(got[0].Data) != "abc" {
			t.Fatalf("second subscriber saw %q, want the original bytes", got[0].Data)
		}
	})

	t.Run("HandlerCallsNeverOverlap", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		var inFlight, maxInFlight, count atomic.Int64
		subscribe(t, b, "s.serial", func(Msg) {
			n := inFlight.Add(1)
			for {
				old := maxInFlight.Load()
				if n <= old || maxInFlight.CompareAndSwap(old, n) {
					break
				}
			}
			for i := 0; i < 1000; i++ { // widen the window for overlap
				_ = i * i
			}
			inFlight.Add(-1)
			count.Add(1)
		})
		const n = 500
		for range n {
			if err := a.Publish("s.serial", []byte{1}); err != nil {
				t.Fatal(err)
			}
		}
		natstest.WaitFor(t, suiteWait, func() error {
			if c := count.Load(); c < n {
				return fmt.Errorf("%d of %d", c, n)
			}
			return nil
		})
		if m := maxInFlight.Load(); m != 1 {
			t.Fatalf("handler ran %d-way concurrently", m)
		}
	})

	t.Run("UnsubscribeStopsDelivery", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		var gone, control recorder
		s := subscribe(t, b, "s.gone", gone.handle)
		subscribe(t, b, "s.control", control.handle)
		if err := s.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := a.Publish("s.gone", []byte("late")); err != nil {
			t.Fatal(err)
		}
		if err := a.Publish("s.control", []byte("marker")); err != nil {
			t.Fatal(err)
		}
		control.waitN(t, 1)
		if got := gone.snapshot(); len(got) != 0 {
			t.Fatalf("unsubscribed handler received %d messages", len(got))
		}
		if err := s.Unsubscribe(); !errors.Is(err, ErrClosed) {
			t.Fatalf("second Unsubscribe = %v, want ErrClosed", err)
		}
		if d := s.Dropped(); d != 0 {
			t.Fatalf("Dropped = %d on an idle subscription", d)
		}
	})

	t.Run("RequestReply", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		subscribe(t, b, "s.rpc", func(m Msg) {
			if err := b.Publish(m.Reply, append([]byte("re:"), m.Data...)); err != nil {
				t.Errorf("respond: %v", err)
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), suiteWait)
		defer cancel()
		for i := range 20 {
			want := "re:" + strconv.Itoa(i)
			got, err := a.Request(ctx, "s.rpc", []byte(strconv.Itoa(i)))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Fatalf("reply %q, want %q", got, want)
			}
		}
	})

	t.Run("RequestWithoutRespondersFailsFast", func(t *testing.T) {
		a := newPair(t).a
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		_, err := a.Request(ctx, "s.void", []byte("?"))
		if !errors.Is(err, ErrNoResponders) {
			t.Fatalf("Request = %v, want ErrNoResponders", err)
		}
		if errors.Is(err, ErrTimeout) {
			t.Fatalf("no-responders error also claims a timeout: %v", err)
		}
		if d := time.Since(start); d > suiteWait {
			t.Fatalf("no-responders took %v; it must not wait for the deadline", d)
		}
	})

	t.Run("RequestTimesOut", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		subscribe(t, b, "s.silent", func(Msg) {}) // never answers
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := a.Request(ctx, "s.silent", []byte("?"))
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("Request = %v, want ErrTimeout", err)
		}
	})

	t.Run("EmptyPayload", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		var r recorder
		subscribe(t, b, "s.empty", r.handle)
		if err := a.Publish("s.empty", nil); err != nil {
			t.Fatal(err)
		}
		if got := r.waitN(t, 1); len(got[0].Data) != 0 {
			t.Fatalf("got %q", got[0].Data)
		}
	})

	t.Run("DisconnectedPublishFailsFast", func(t *testing.T) {
		p := newPair(t)
		p.disconnect()
		// Loss of the connection is noticed asynchronously; poll until a
		// publish reports it, which must then happen without blocking.
		natstest.WaitFor(t, suiteWait, func() error {
			start := time.Now()
			err := p.a.Publish("s.down", []byte("x"))
			if d := time.Since(start); d > time.Second {
				t.Fatalf("publish while disconnected blocked for %v", d)
			}
			if !errors.Is(err, ErrDisconnected) {
				return fmt.Errorf("publish = %v, want ErrDisconnected", err)
			}
			return nil
		})
		if _, err := p.a.Request(context.Background(), "s.down", nil); !errors.Is(err, ErrDisconnected) {
			t.Fatalf("request while disconnected = %v, want ErrDisconnected", err)
		}
	})

	t.Run("ClosedFails", func(t *testing.T) {
		p := newPair(t)
		p.close()
		if err := p.a.Publish("s.closed", []byte("x")); !errors.Is(err, ErrClosed) {
			t.Fatalf("publish after close = %v, want ErrClosed", err)
		}
		if _, err := p.a.Subscribe("s.closed", func(Msg) {}); !errors.Is(err, ErrClosed) {
			t.Fatalf("subscribe after close = %v, want ErrClosed", err)
		}
		if err := p.a.Flush(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("flush after close = %v, want ErrClosed", err)
		}
	})

	t.Run("LargePayload", func(t *testing.T) {
		p := newPair(t)
		a, b := p.a, p.b
		var r recorder
		subscribe(t, b, "s.big", r.handle)
		big := bytes.Repeat([]byte("0123456789abcdef"), 32<<10) // 512 KiB
		if err := a.Publish("s.big", big); err != nil {
			t.Fatal(err)
		}
		if got := r.waitN(t, 1); !bytes.Equal(got[0].Data, big) {
			t.Fatal("large payload corrupted")
		}
	})
}
