package recovery

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// SnapshotSource writes one /dump document to w. It is called once per snapshot id. To keep
// selections flowing on the serving replica it must not hold the engine lock for the whole
// write: core's implementation takes it per partition.
type SnapshotSource func(w io.Writer) error

// ServerOptions configures a SnapshotServer. Zero values take the defaults noted.
type ServerOptions struct {
	// TTL is how long an encoded snapshot stays after its last chunk request (default 30 s).
	TTL time.Duration
	// MaxSnapshots bounds the snapshots held at once; a new request beyond it gets an error
	// reply ("busy") unless an expired one can be dropped (default 2).
	MaxSnapshots int
	// MaxChunk caps the chunk body whatever the requester asks (default 8 MiB).
	MaxChunk int
	// Clock returns the time (default time.Now).
	Clock func() time.Time
	// Logger receives one line per encoded snapshot (default: discard).
	Logger *slog.Logger
}

// Server defaults.
const (
	DefaultSnapshotTTL   = 30 * time.Second
	DefaultMaxSnapshots  = 2
	DefaultServerMaxBody = 8 << 20
)

// SnapshotServer answers chunk requests (see snapwire.go) from snapshots it encodes with its
// source. Handle has the signature of bus.SnapshotHandler.
//
// Concurrency: safe for concurrent use; mu guards the snapshot table and is never held while
// the source runs (two first requests may encode concurrently, each under its own id).
type SnapshotServer struct {
	src   SnapshotSource
	opts  ServerOptions
	log   *slog.Logger
	mu    sync.Mutex
	snaps map[snapID]*snapshot // guarded by mu
	// creating counts snapshots being encoded (guarded by mu): with snaps it bounds memory by
	// MaxSnapshots even when first requests arrive concurrently.
	creating int
}

// snapshot is one encoded payload; immutable after creation except expires (guarded by mu).
type snapshot struct {
	data    []byte
	sum     [32]byte
	chunk   int // chunk body size, fixed by the first request
	total   uint32
	expires time.Time
}

// NewSnapshotServer returns a server that encodes snapshots with src.
func NewSnapshotServer(src SnapshotSource, opts ServerOptions) *SnapshotServer {
	opts.TTL = cmp.Or(max(opts.TTL, 0), DefaultSnapshotTTL)
	opts.MaxSnapshots = cmp.Or(max(opts.MaxSnapshots, 0), DefaultMaxSnapshots)
	opts.MaxChunk = cmp.Or(max(opts.MaxChunk, 0), DefaultServerMaxBody)
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	return &SnapshotServer{src: src, opts: opts, log: log, snaps: make(map[snapID]*snapshot)}
}

// Held returns how many encoded snapshots the server holds (expired ones included until the
// next request drops them).
func (s *SnapshotServer) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.snaps)
}

// Handle answers one request frame. It always returns a reply (an error frame for bad or
// unserviceable requests) so that requesters move on at once instead of timing out; the error
// result is always nil.
func (s *SnapshotServer) Handle(req []byte) ([]byte, error) {
	r, err := decodeRequest(req)
	if err != nil {
		return errorReply(snapID{}, 0, err.Error()), nil
	}
	chunk := int(min(uint64(r.maxChunk), uint64(s.opts.MaxChunk)))
	if chunk < MinChunkBytes {
		return errorReply(r.id, r.seq, fmt.Sprintf("max chunk %d below %d", r.maxChunk, MinChunkBytes)), nil
	}
	var snap *snapshot
	if r.id == (snapID{}) {
		if r.seq != 0 {
			return errorReply(r.id, r.seq, "a new snapshot starts at chunk 0"), nil
		}
		if r.id, snap, err = s.create(chunk); err != nil {
			return errorReply(snapID{}, 0, err.Error()), nil
		}
	} else if snap = s.lookup(r.id); snap == nil {
		return errorReply(r.id, r.seq, "unknown or expired snapshot id"), nil
	}
	if r.seq >= snap.total {
		return errorReply(r.id, r.seq, fmt.Sprintf("chunk %d out of range (total %d)", r.seq, snap.total)), nil
	}
	if chunk < snap.chunk {
		return errorReply(r.id, r.seq, fmt.Sprintf("max chunk %d below the snapshot's chunk size %d", chunk, snap.chunk)), nil
	}
	lo := int(r.seq) * snap.chunk
	hi := min(lo+snap.chunk, len(snap.data))
	rep := chunkReply{status: statusOK, format: formatDumpV1, id: r.id, seq: r.seq, total: snap.total,
		size: uint64(len(snap.data)), sum: snap.sum, body: snap.data[lo:hi]}
	out := rep.encode()
	if r.seq == snap.total-1 {
		// The transfer is complete: keep the snapshot only briefly, for a retried last chunk.
		s.expireSoon(r.id, lastChunkGrace)
	}
	return out, nil
}

// lastChunkGrace is how long a snapshot outlives the reply of its last chunk.
const lastChunkGrace = 2 * time.Second

// expireSoon shortens a snapshot's life to d and makes sure it is released then, even if no
// further snapshot request ever arrives (a served snapshot can be hundreds of MB).
func (s *SnapshotServer) expireSoon(id snapID, d time.Duration) {
	s.mu.Lock()
	if snap := s.snaps[id]; snap != nil {
		if at := s.opts.Clock().Add(d); at.Before(snap.expires) {
			snap.expires = at
		}
	}
	s.mu.Unlock()
	time.AfterFunc(d+10*time.Millisecond, s.sweep)
}

// sweep releases expired snapshots.
func (s *SnapshotServer) sweep() {
	now := s.opts.Clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.snaps {
		if now.After(v.expires) {
			delete(s.snaps, k)
		}
	}
}

// lookup returns a live snapshot and refreshes its TTL.
func (s *SnapshotServer) lookup(id snapID) *snapshot {
	now := s.opts.Clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snaps[id]
	if snap == nil || now.After(snap.expires) {
		delete(s.snaps, id)
		return nil
	}
	snap.expires = now.Add(s.opts.TTL)
	time.AfterFunc(s.opts.TTL+10*time.Millisecond, s.sweep) // release it if the transfer stalls here
	return snap
}

// create encodes a new snapshot with the given chunk size.
func (s *SnapshotServer) create(chunk int) (snapID, *snapshot, error) {
	var id snapID
	now := s.opts.Clock()
	s.mu.Lock()
	for k, v := range s.snaps {
		if now.After(v.expires) {
			delete(s.snaps, k)
		}
	}
	full := len(s.snaps)+s.creating >= s.opts.MaxSnapshots
	if !full {
		s.creating++ // reserve the slot before encoding outside the lock
	}
	s.mu.Unlock()
	if full {
		return id, nil, fmt.Errorf("busy: %d snapshots in flight", s.opts.MaxSnapshots)
	}
	defer func() {
		s.mu.Lock()
		s.creating--
		s.mu.Unlock()
	}()
	start := time.Now()
	var buf bytes.Buffer
	h := sha256.New()
	if err := s.src(io.MultiWriter(&buf, h)); err != nil {
		return id, nil, fmt.Errorf("encoding snapshot: %w", err)
	}
	snap := &snapshot{data: buf.Bytes(), chunk: chunk}
	h.Sum(snap.sum[:0])
	n := (len(snap.data) + chunk - 1) / chunk
	if n == 0 {
		n = 1 // an empty payload is one empty chunk
	}
	if n > 1<<31 {
		return id, nil, fmt.Errorf("snapshot of %d bytes needs too many chunks", len(snap.data))
	}
	snap.total = uint32(n)
	_, _ = rand.Read(id[:]) // never fails (crypto/rand since Go 1.24)
	s.mu.Lock()
	snap.expires = s.opts.Clock().Add(s.opts.TTL)
	s.snaps[id] = snap
	s.mu.Unlock()
	// An abandoned transfer is released when its TTL runs out, not at the next request.
	time.AfterFunc(s.opts.TTL+10*time.Millisecond, s.sweep)
	s.log.Info("encoded index snapshot", "bytes", len(snap.data), "chunks", n, "chunk_bytes", chunk,
		"encode", time.Since(start).String())
	return id, snap, nil
}
