package mockworker

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/internal/poll"
)

// dialSub connects a go-zeromq SUB to ep with topic prefix and closes it at cleanup.
func dialSub(t *testing.T, ep, topic string) zmq4.Socket {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := zmq4.NewSub(ctx, zmq4.WithDialerMaxRetries(50), zmq4.WithDialerRetry(20*time.Millisecond))
	if err := s.SetOption(zmq4.OptionSubscribe, topic); err != nil {
		t.Fatal(err)
	}
	if err := s.Dial(ep); err != nil {
		t.Fatalf("dial %s: %v", ep, err)
	}
	t.Cleanup(func() { cancel(); _ = s.Close() })
	return s
}

// recvTimeout receives one message or fails the test after d.
func recvTimeout(t *testing.T, s zmq4.Socket, d time.Duration) zmq4.Msg {
	t.Helper()
	type res struct {
		m   zmq4.Msg
		err error
	}
	ch := make(chan res, 1)
	go func() { m, err := s.Recv(); ch <- res{m, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("recv: %v", r.err)
		}
		return r.m
	case <-time.After(d):
		t.Fatalf("no message within %v", d)
	}
	return zmq4.Msg{}
}

// TestLiveFramesOnTheWire: a real SUB receives exactly vLLM's three frames — topic, 8-byte
// big-endian seq, payload — and the payload is the one kept for replay.
func TestLiveFramesOnTheWire(t *testing.T) {
	w := newWorker(t, Config{BlockSize: 4, NumGPUBlocks: 64, Topic: "kv-events", Clock: NewInstantClock(epoch0)})
	sub := dialSub(t, w.Endpoints()[0], "kv")
	poll.True(t, poll.Generous, "subscription", func() bool { return w.Subscribed(0) })
	for i := range 3 {
		if _, err := w.Serve(context.Background(), Request{PromptTokenIDs: tokens(uint32(i)*100, 8)}); err != nil {
			t.Fatal(err)
		}
	}
	recs, _ := w.Published(0, 0)
	for i := range 3 {
		m := recvTimeout(t, sub, poll.Generous)
		topic, seq, payload, err := kvevents.ParseLive(m.Frames)
		if err != nil {
			t.Fatal(err)
		}
		if string(topic) != "kv-events" || seq != uint64(i) || !bytes.Equal(payload, recs[i].Payload) {
			t.Fatalf("message %d: topic %q seq %d, payload equal %v", i, topic, seq, bytes.Equal(payload, recs[i].Payload))
		}
	}
}

// TestReplayProtocol speaks vLLM's replay protocol to the ROUTER with a raw DEALER: replies
// for every buffered seq ≥ start in order, in the 4-frame shape, then the end marker;
// malformed requests are ignored and counted; the ring keeps only the last ReplayBuffer.
func TestReplayProtocol(t *testing.T) {
	w := newWorker(t, Config{
		BlockSize: 4, NumGPUBlocks: 64, Topic: "t", ReplayBuffer: 3,
		ReplayEndpoint: "tcp://127.0.0.1:0", Clock: NewInstantClock(epoch0),
	})
	for i := range 5 {
		if _, err := w.Serve(context.Background(), Request{PromptTokenIDs: tokens(uint32(i)*100, 4)}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := zmq4.NewDealer(ctx, zmq4.WithDialerMaxRetries(50), zmq4.WithDialerRetry(20*time.Millisecond))
	defer d.Close()
	if err := d.Dial(w.ReplayEndpoints()[0]); err != nil {
		t.Fatal(err)
	}
	// Malformed first: wrong frame count, non-empty delimiter, short seq. None is answered.
	for _, bad := range [][][]byte{
		{kvevents.AppendReplayRequest(nil, 0)},
		{[]byte("x"), kvevents.AppendReplayRequest(nil, 0)},
		{{}, {1, 2, 3}},
	} {
		if err := d.SendMulti(zmq4.NewMsgFrom(bad...)); err != nil {
			t.Fatal(err)
		}
	}
	poll.True(t, poll.Generous, "malformed requests counted", func() bool { return w.Stats()[0].Publisher.BadReplays == 3 })

	recs, _ := w.Published(0, 0)
	if len(recs) != 3 || recs[0].Seq != 2 {
		t.Fatalf("ring holds %d records from seq %d, want 3 from 2", len(recs), recs[0].Seq)
	}
	for _, c := range []struct{ start, first uint64 }{{0, 2}, {3, 3}, {4, 4}, {9, 5}} {
		if err := d.SendMulti(zmq4.NewMsgFrom([]byte{}, kvevents.AppendReplayRequest(nil, c.start))); err != nil {
			t.Fatal(err)
		}
		for want := c.first; ; want++ {
			m := recvTimeout(t, d, poll.Generous)
			if len(m.Frames) != 4 {
				t.Fatalf("reply with %d frames, want 4", len(m.Frames))
			}
			topic, seq, payload, end, err := kvevents.ParseReplay(m.Frames)
			if err != nil {
				t.Fatal(err)
			}
			if end {
				if want != 5 || seq != kvevents.ReplayEndSeq || len(topic) != 0 {
					t.Fatalf("start %d: end marker after seq %d (seq %x topic %q)", c.start, want, seq, topic)
				}
				break
			}
			if seq != want || string(topic) != "t" || !bytes.Equal(payload, recs[want-2].Payload) {
				t.Fatalf("start %d: reply seq %d topic %q, want seq %d", c.start, seq, topic, want)
			}
		}
	}
}

// TestParseReplayRequest pins the accepted request shape.
func TestParseReplayRequest(t *testing.T) {
	seq := binary.BigEndian.AppendUint64(nil, 77)
	cases := []struct {
		name   string
		frames [][]byte
		ok     bool
	}{
		{"dealer request", [][]byte{[]byte("id"), {}, seq}, true},
		{"no delimiter", [][]byte{[]byte("id"), seq}, false},
		{"delimiter not empty", [][]byte{[]byte("id"), {0}, seq}, false},
		{"seq too short", [][]byte{[]byte("id"), {}, seq[:7]}, false},
		{"extra frame", [][]byte{[]byte("id"), {}, seq, {}}, false},
		{"nothing", nil, false},
	}
	for _, c := range cases {
		id, start, err := ParseReplayRequest(c.frames)
		if (err == nil) != c.ok {
			t.Fatalf("%s: err %v, want ok=%v", c.name, err, c.ok)
		}
		if c.ok && (string(id) != "id" || start != 77) {
			t.Fatalf("%s: id %q start %d", c.name, id, start)
		}
	}
}

// TestRestartNewIncarnation: Restart empties the caches silently, rebinds the same endpoints,
// and numbers batches from 0 again with an empty replay buffer.
func TestRestartNewIncarnation(t *testing.T) {
	w := newWorker(t, Config{BlockSize: 4, NumGPUBlocks: 64, ReplayEndpoint: "tcp://127.0.0.1:0", Clock: NewInstantClock(epoch0)})
	eps, reps := w.Endpoints(), w.ReplayEndpoints()
	p := tokens(1, 8)
	for range 2 {
		if _, err := w.Serve(context.Background(), Request{PromptTokenIDs: append(p, 99)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if w.Endpoints()[0] != eps[0] || w.ReplayEndpoints()[0] != reps[0] {
		t.Fatal("endpoints changed across restart")
	}
	st := w.Stats()[0]
	if st.CachedBlocks != 0 || st.Incarnation != 1 || st.Publisher.NextSeq != 0 || st.Publisher.Buffered != 0 {
		t.Fatalf("after restart: %+v", st)
	}
	r, err := w.Serve(context.Background(), Request{PromptTokenIDs: p})
	if err != nil || r.CachedTokens != 0 {
		t.Fatalf("after restart: %+v %v, want a cold cache", r, err)
	}
	recs, _ := w.Published(0, 0)
	if len(recs) != 1 || recs[0].Seq != 0 {
		t.Fatalf("after restart: %d records, first seq %d", len(recs), recs[0].Seq)
	}
	sub := dialSub(t, eps[0], "")
	poll.True(t, poll.Generous, "subscription after restart", func() bool { return w.Subscribed(0) })
	if _, err := w.Serve(context.Background(), Request{PromptTokenIDs: tokens(500, 4)}); err != nil {
		t.Fatal(err)
	}
	if _, seq, _, err := kvevents.ParseLive(recvTimeout(t, sub, poll.Generous).Frames); err != nil || seq != 1 {
		t.Fatalf("live after restart: seq %d err %v, want 1", seq, err)
	}
}
