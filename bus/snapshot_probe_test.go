package bus

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// The probe finds a replica that serves snapshots; nobody serving is "no responders" at once,
// and a replica never names itself.
func TestSnapshotProbe(t *testing.T) {
	n := NewMemNetwork()
	a := newRep(t, n.Connect(), Config{ReplicaID: "tcp://a:1"})
	b := newRep(t, n.Connect(), Config{ReplicaID: "tcp://b:1"})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := b.ProbeSnapshotSource(ctx); !errors.Is(err, ErrNoResponders) {
		t.Fatalf("nobody serving: %v", err)
	}
	if err := a.ServeSnapshotProbe(); err != nil {
		t.Fatal(err)
	}
	if id, err := b.ProbeSnapshotSource(ctx); err != nil || id != "tcp://a:1" {
		t.Fatalf("probe = %q, %v; want tcp://a:1", id, err)
	}
	if _, err := a.ProbeSnapshotSource(ctx); err == nil {
		t.Fatal("a replica found itself as a snapshot source")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ProbeSnapshotSource(ctx); !errors.Is(err, ErrNoResponders) {
		t.Fatalf("after the server closed: %v", err)
	}
}

func TestProbeReplyCodec(t *testing.T) {
	id, err := DecodeProbeReply(EncodeProbeReply("tcp://x:9"))
	if err != nil || id != "tcp://x:9" {
		t.Fatalf("round trip: %q, %v", id, err)
	}
	if id, err := DecodeProbeReply(append([]byte{7}, "later-version"...)); err != nil || id != "later-version" {
		t.Fatalf("newer version: %q, %v", id, err)
	}
	for _, b := range [][]byte{nil, {1}, {0, 'a'}, append([]byte{1}, bytes.Repeat([]byte("x"), maxReplicaIDLen+1)...)} {
		if _, err := DecodeProbeReply(b); !errors.Is(err, ErrProbeReply) {
			t.Errorf("%q: %v", b, err)
		}
	}
}

func FuzzDecodeProbeReply(f *testing.F) {
	f.Add(EncodeProbeReply("tcp://a:1"))
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := DecodeProbeReply(b)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeProbeReply(id)[1:], b[1:]) || ValidateReplicaID(id) != nil {
			t.Fatalf("accepted %q as %q", b, id)
		}
	})
}
