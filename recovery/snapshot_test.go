package recovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus"
)

// memRequester routes snapshot requests to in-process servers by replica id, with optional
// fault injection on replies. Real-NATS coverage lives in core (one nats-server test binary).
type memRequester struct {
	servers map[string]*SnapshotServer
	mangle  func(peer string, seq uint32, reply []byte) ([]byte, error) // optional
	calls   atomic.Int32
}

func (m *memRequester) RequestSnapshot(ctx context.Context, peer string, req []byte) ([]byte, error) {
	m.calls.Add(1)
	srv := m.servers[peer]
	if srv == nil {
		return nil, fmt.Errorf("mem: %w", bus.ErrNoResponders)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reply, _ := srv.Handle(req)
	if m.mangle != nil {
		r, _ := decodeRequest(req)
		return m.mangle(peer, r.seq, reply)
	}
	return reply, nil
}

func staticSource(doc []byte) SnapshotSource {
	return func(w io.Writer) error { _, err := w.Write(doc); return err }
}

func natsOpts(m *memRequester, peers ...string) NATSOptions {
	return NATSOptions{Requester: m, Candidates: func() []string { return peers }, MaxChunk: MinChunkBytes * 4,
		ChunkTimeout: time.Second, FirstChunkTimeout: time.Second, Deadline: 10 * time.Second,
		RetryFor: -1} // one round: retries are tested in snapretry_test.go
}

// TestFetchNATSMultiChunk: a snapshot much larger than one chunk arrives whole, in order, once
// encoded; every chunk size is at most the requested limit.
func TestFetchNATSMultiChunk(t *testing.T) {
	doc := genDump(3, 10, 20) // ~100 KiB, ~25 chunks of 4 KiB
	encodes := 0
	src := func(w io.Writer) error { encodes++; _, err := w.Write(doc); return err }
	srv := NewSnapshotServer(src, ServerOptions{})
	m := &memRequester{servers: map[string]*SnapshotServer{"b": srv}}
	var maxBody int
	m.mangle = func(_ string, _ uint32, reply []byte) ([]byte, error) {
		maxBody = max(maxBody, len(reply)-replyHeadLen)
		return reply, nil
	}
	s := newRecSink(t)
	res, err := FetchNATS(context.Background(), s, natsOpts(m, "a-gone", "b"))
	if err != nil {
		t.Fatalf("FetchNATS: %v", err)
	}
	chunks := (len(doc) + MinChunkBytes*4 - 1) / (MinChunkBytes * 4)
	if chunks < 10 || int(m.calls.Load()) != chunks+1 { // +1: the no-responders probe of "a-gone"
		t.Fatalf("%d requests for %d chunks", m.calls.Load(), chunks)
	}
	if encodes != 1 || maxBody > MinChunkBytes*4 || res.Peer != "b" || res.Attempts != 2 || res.Source != "nats" {
		t.Fatalf("encodes=%d maxBody=%d res=%+v", encodes, maxBody, res)
	}
	if res.Stats.Bytes != int64(len(doc)) || s.blocks() != 3*10*20 || s.discards != 1 {
		t.Fatalf("stats %+v blocks %d discards %d", res.Stats, s.blocks(), s.discards)
	}
}

// TestFetchNATSAlone: no candidates, or only candidates without a responder, fails with
// ErrNoPeer at once (no timeout is waited for).
func TestFetchNATSAlone(t *testing.T) {
	m := &memRequester{servers: map[string]*SnapshotServer{}}
	s := newRecSink(t)
	start := time.Now()
	if _, err := FetchNATS(context.Background(), s, natsOpts(m)); !errors.Is(err, ErrNoPeer) {
		t.Fatalf("no candidates: %v", err)
	}
	_, err := FetchNATS(context.Background(), s, natsOpts(m, "x", "y"))
	if !errors.Is(err, ErrNoPeer) || !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("no responders: %v", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("took %v; alone must be immediate", d)
	}
}

// TestFetchNATSDiscoveryWait: a candidate appearing during DiscoveryWait is used.
func TestFetchNATSDiscoveryWait(t *testing.T) {
	srv := NewSnapshotServer(staticSource([]byte(`{}`)), ServerOptions{})
	m := &memRequester{servers: map[string]*SnapshotServer{"late": srv}}
	var polls atomic.Int32
	o := natsOpts(m)
	o.DiscoveryWait, o.PollInterval = 5*time.Second, time.Millisecond
	o.Candidates = func() []string {
		if polls.Add(1) < 5 {
			return nil
		}
		return []string{"late"}
	}
	res, err := FetchNATS(context.Background(), newRecSink(t), o)
	if err != nil || res.Peer != "late" {
		t.Fatalf("res %+v err %v", res, err)
	}
}

// TestFetchNATSFaults: corrupted, reordered, foreign, truncated or refused chunks fail the
// attempt (the sink is discarded, nothing from that peer is kept) and the next peer is used.
func TestFetchNATSFaults(t *testing.T) {
	doc := genDump(2, 5, 20)
	flip := func(b []byte, i int) []byte { c := append([]byte(nil), b...); c[i] ^= 0x20; return c }
	tests := []struct {
		name   string
		mangle func(seq uint32, reply []byte) ([]byte, error)
		want   error
	}{
		{"flipped payload byte", func(seq uint32, r []byte) ([]byte, error) {
			if seq == 3 { // change one digit into another: still valid JSON, only the digest can tell
				c := append([]byte(nil), r...)
				for i := replyHeadLen; i < len(c); i++ {
					if c[i] >= '1' && c[i] <= '8' {
						c[i]++
						break
					}
				}
				return c, nil
			}
			return r, nil
		}, ErrDigest},
		{"wrong sequence", func(seq uint32, r []byte) ([]byte, error) {
			if seq == 2 {
				c := append([]byte(nil), r...)
				c[27] = 9
				return c, nil
			}
			return r, nil
		}, ErrProtocol},
		{"foreign snapshot id", func(seq uint32, r []byte) ([]byte, error) {
			if seq == 1 {
				return flip(r, 10), nil
			}
			return r, nil
		}, ErrProtocol},
		{"changed digest", func(seq uint32, r []byte) ([]byte, error) {
			if seq == 4 {
				return flip(r, 50), nil
			}
			return r, nil
		}, ErrProtocol},
		{"short frame", func(seq uint32, r []byte) ([]byte, error) {
			if seq == 1 {
				return r[:10], nil
			}
			return r, nil
		}, ErrProtocol},
		{"version bump", func(seq uint32, r []byte) ([]byte, error) {
			c := append([]byte(nil), r...)
			c[4] = 2
			return c, nil
		}, ErrProtocol},
		{"lost reply", func(seq uint32, r []byte) ([]byte, error) {
			if seq == 2 {
				return nil, fmt.Errorf("lost: %w", bus.ErrTimeout)
			}
			return r, nil
		}, bus.ErrTimeout},
		{"truncated body", func(seq uint32, r []byte) ([]byte, error) {
			if seq == 5 {
				return r[:len(r)-7], nil
			}
			return r, nil
		}, ErrMalformed}, // the parser notices the shifted stream before the byte count ends
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := NewSnapshotServer(staticSource(doc), ServerOptions{})
			good := NewSnapshotServer(staticSource(doc), ServerOptions{})
			m := &memRequester{servers: map[string]*SnapshotServer{"bad": bad, "good": good}}
			m.mangle = func(peer string, seq uint32, r []byte) ([]byte, error) {
				if peer == "bad" {
					return tc.mangle(seq, r)
				}
				return r, nil
			}
			s := newRecSink(t)
			res, err := FetchNATS(context.Background(), s, natsOpts(m, "bad", "good"))
			if err != nil || res.Peer != "good" || s.discards != 1 || s.blocks() != 2*5*20 {
				t.Fatalf("res %+v err %v discards %d blocks %d", res, err, s.discards, s.blocks())
			}
			s2 := newRecSink(t)
			_, err = FetchNATS(context.Background(), s2, natsOpts(m, "bad"))
			if !errors.Is(err, ErrNoPeer) || !errors.Is(err, tc.want) {
				t.Fatalf("bad alone: err %v, want %v", err, tc.want)
			}
			if len(s2.done) != 0 || s2.cur != nil {
				t.Fatalf("bad peer left %d partitions staged", len(s2.done))
			}
		})
	}
}

// TestSnapshotServerRequests covers the responder's validation, TTL and capacity.
func TestSnapshotServerRequests(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	srv := NewSnapshotServer(staticSource(make([]byte, 5000)), ServerOptions{TTL: 10 * time.Second, MaxSnapshots: 1, Clock: clock})
	ask := func(req chunkRequest) chunkReply {
		b, err := srv.Handle(req.encode())
		if err != nil {
			t.Fatalf("Handle returned %v", err)
		}
		r, err := decodeReply(b)
		if err != nil {
			t.Fatalf("reply: %v", err)
		}
		return r
	}
	first := ask(chunkRequest{maxChunk: 2048})
	if first.status != statusOK || first.total != 3 || first.size != 5000 || len(first.body) != 2048 {
		t.Fatalf("first %+v", first)
	}
	if r := ask(chunkRequest{id: first.id, seq: 2, maxChunk: 2048}); r.status != statusOK || len(r.body) != 5000-4096 {
		t.Fatalf("last chunk %+v", r)
	}
	if r := ask(chunkRequest{id: first.id, seq: 3, maxChunk: 2048}); r.status != statusError {
		t.Fatal("chunk past the end accepted")
	}
	if r := ask(chunkRequest{id: first.id, seq: 1, maxChunk: 1500}); r.status != statusError {
		t.Fatal("a smaller limit than the snapshot's chunk size accepted")
	}
	if r := ask(chunkRequest{maxChunk: 100}); r.status != statusError {
		t.Fatal("a limit below MinChunkBytes accepted")
	}
	if r := ask(chunkRequest{seq: 1, maxChunk: 2048}); r.status != statusError {
		t.Fatal("a new snapshot not starting at chunk 0 accepted")
	}
	if r := ask(chunkRequest{maxChunk: 2048}); r.status != statusError {
		t.Fatal("second snapshot accepted beyond MaxSnapshots=1")
	}
	if b, _ := srv.Handle([]byte("garbage")); b == nil {
		t.Fatal("garbage got no reply")
	} else if r, _ := decodeReply(b); r.status != statusError {
		t.Fatal("garbage not refused")
	}
	now = now.Add(11 * time.Second)
	if r := ask(chunkRequest{id: first.id, seq: 1, maxChunk: 2048}); r.status != statusError {
		t.Fatal("expired snapshot still served")
	}
	if r := ask(chunkRequest{maxChunk: 2048}); r.status != statusOK || r.id == first.id {
		t.Fatalf("new snapshot after expiry: %+v", r)
	}
	if srv.Held() != 1 {
		t.Fatalf("held %d", srv.Held())
	}
	failing := NewSnapshotServer(func(io.Writer) error { return errors.New("engine gone") }, ServerOptions{})
	b, _ := failing.Handle((&chunkRequest{maxChunk: 4096}).encode())
	if r, _ := decodeReply(b); r.status != statusError {
		t.Fatal("source failure not reported")
	}
}

// TestSnapshotEmpty: an empty payload is one empty chunk and parses as an error (not a dump);
// an empty document "{}" is a success.
func TestSnapshotEmpty(t *testing.T) {
	m := &memRequester{servers: map[string]*SnapshotServer{
		"empty": NewSnapshotServer(staticSource(nil), ServerOptions{}),
		"none":  NewSnapshotServer(staticSource([]byte("{}")), ServerOptions{}),
	}}
	if _, err := FetchNATS(context.Background(), newRecSink(t), natsOpts(m, "empty")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty payload: %v", err)
	}
	res, err := FetchNATS(context.Background(), newRecSink(t), natsOpts(m, "none"))
	if err != nil || res.Stats.Partitions != 0 {
		t.Fatalf("empty dump: %+v %v", res, err)
	}
}

// TestSnapshotReleasedAfterTransfer: a fully served snapshot is released shortly after its last
// chunk even if no further request ever comes (found in review: a served snapshot stayed in
// memory until the next snapshot request, possibly forever).
func TestSnapshotReleasedAfterTransfer(t *testing.T) {
	now := time.Unix(1000, 0)
	srv := NewSnapshotServer(staticSource(make([]byte, 5000)), ServerOptions{TTL: time.Hour, Clock: func() time.Time { return now }})
	var id snapID
	for seq := uint32(0); seq < 3; seq++ {
		b, err := srv.Handle((&chunkRequest{id: id, seq: seq, maxChunk: 2048}).encode())
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeReply(b)
		if err != nil || r.status != statusOK {
			t.Fatalf("chunk %d: %+v %v", seq, r, err)
		}
		id = r.id
	}
	srv.sweep()
	if srv.Held() != 1 {
		t.Fatal("released before the grace period for a retried last chunk")
	}
	now = now.Add(lastChunkGrace + time.Second)
	srv.sweep() // what the timer armed by the last chunk does
	if srv.Held() != 0 {
		t.Fatalf("%d snapshots still held after the transfer completed", srv.Held())
	}
}
