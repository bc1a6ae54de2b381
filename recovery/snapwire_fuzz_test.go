package recovery

import (
	"testing"
)

// FuzzSnapshotWire: the chunk protocol's decoders take bytes from peers; they never panic, and
// what they accept re-encodes to an equal message.
func FuzzSnapshotWire(f *testing.F) {
	f.Add((&chunkRequest{maxChunk: 4096}).encode())
	f.Add((&chunkRequest{id: snapID{1, 2, 3}, seq: 7, maxChunk: 1 << 20}).encode())
	f.Add((&chunkReply{status: statusOK, format: formatDumpV1, seq: 1, total: 3, size: 10, body: []byte("{}")}).encode())
	f.Add(errorReply(snapID{9}, 2, "busy"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeRequest(b); err == nil {
			again, err := decodeRequest(r.encode())
			if err != nil || again != r {
				t.Fatalf("request %+v does not round-trip: %+v, %v", r, again, err)
			}
		}
		if r, err := decodeReply(b); err == nil {
			again, err := decodeReply(r.encode())
			if err != nil || again.status != r.status || again.id != r.id || again.seq != r.seq ||
				again.total != r.total || again.size != r.size || string(again.body) != string(r.body) {
				t.Fatalf("reply %+v does not round-trip: %+v, %v", r, again, err)
			}
		}
		srv := NewSnapshotServer(staticSource([]byte(`{"m:g":{"block_size":4,"events":[]}}`)), ServerOptions{})
		if out, err := srv.Handle(b); err == nil && out == nil {
			t.Fatal("Handle gave no reply and no error")
		}
	})
}
