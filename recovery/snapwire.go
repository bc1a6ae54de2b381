package recovery

import (
	"encoding/binary"
	"fmt"
)

// NATS snapshot chunk protocol, version 1 (pull-based, style guide §3.6).
//
// A requester pulls a snapshot from one chosen replica with ordinary request/reply messages on
// that replica's snapshot subject (bus.Subjects.Snapshot). Every request asks for one chunk;
// every reply carries one chunk and the snapshot's identity, so a lost reply costs one chunk and
// flow control is the requester's pace.
//
//	request  (32 bytes, big-endian integers)
//	  0  magic "KVSQ"
//	  4  version (1)
//	  5  3 reserved bytes (0)
//	  8  snapshot id (16 bytes; all zero = "encode a new snapshot and send chunk 0")
//	 24  chunk sequence number (u32; 0 for a new snapshot)
//	 28  max chunk body the requester accepts (u32)
//
//	reply    (72-byte header, then the chunk body)
//	  0  magic "KVSP"
//	  4  version (1)
//	  5  status: 0 ok, 1 error (the body is a UTF-8 message)
//	  6  payload format: 1 = the /dump JSON document (spec §11.2)
//	  7  reserved (0)
//	  8  snapshot id (16 bytes)
//	 24  chunk sequence number (u32)
//	 28  total number of chunks (u32, ≥ 1)
//	 32  total payload bytes (u64)
//	 40  SHA-256 of the whole payload (32 bytes)
//	 72  chunk body: payload[seq*chunkSize : min((seq+1)*chunkSize, total bytes)]
//
// The responder encodes the payload once per snapshot id, with the chunk size fixed by the
// first request (min of the requester's limit and its own cap), and keeps it for a short TTL
// refreshed by every chunk request. The requester checks id, sequence, totals and digest on
// every chunk and verifies the SHA-256 over the reassembled payload before the last byte is
// released to the parser, so a corrupted or mixed-up snapshot is never installed.

const (
	wireVersion   = 1
	reqLen        = 32
	replyHeadLen  = 72
	statusOK      = 0
	statusError   = 1
	formatDumpV1  = 1
	snapshotIDLen = 16
	// MinChunkBytes is the smallest chunk body a requester may ask for.
	MinChunkBytes = 1 << 10
)

var (
	reqMagic   = [4]byte{'K', 'V', 'S', 'Q'}
	replyMagic = [4]byte{'K', 'V', 'S', 'P'}
)

// snapID identifies one encoded snapshot on its responder.
type snapID [snapshotIDLen]byte

// chunkRequest is a decoded request frame.
type chunkRequest struct {
	id       snapID
	seq      uint32
	maxChunk uint32
}

func (r *chunkRequest) encode() []byte {
	b := make([]byte, reqLen)
	copy(b[0:4], reqMagic[:])
	b[4] = wireVersion
	copy(b[8:24], r.id[:])
	binary.BigEndian.PutUint32(b[24:28], r.seq)
	binary.BigEndian.PutUint32(b[28:32], r.maxChunk)
	return b
}

func decodeRequest(b []byte) (chunkRequest, error) {
	var r chunkRequest
	if len(b) != reqLen || [4]byte(b[0:4]) != reqMagic {
		return r, fmt.Errorf("%w: not a snapshot request frame", ErrProtocol)
	}
	if b[4] != wireVersion {
		return r, fmt.Errorf("%w: request version %d, want %d", ErrProtocol, b[4], wireVersion)
	}
	r.id = snapID(b[8:24])
	r.seq = binary.BigEndian.Uint32(b[24:28])
	r.maxChunk = binary.BigEndian.Uint32(b[28:32])
	return r, nil
}

// chunkReply is a decoded reply frame; body aliases the frame.
type chunkReply struct {
	status uint8
	format uint8
	id     snapID
	seq    uint32
	total  uint32
	size   uint64
	sum    [32]byte
	body   []byte
}

func (r *chunkReply) encode() []byte {
	b := make([]byte, replyHeadLen+len(r.body))
	copy(b[0:4], replyMagic[:])
	b[4] = wireVersion
	b[5] = r.status
	b[6] = r.format
	copy(b[8:24], r.id[:])
	binary.BigEndian.PutUint32(b[24:28], r.seq)
	binary.BigEndian.PutUint32(b[28:32], r.total)
	binary.BigEndian.PutUint64(b[32:40], r.size)
	copy(b[40:72], r.sum[:])
	copy(b[replyHeadLen:], r.body)
	return b
}

func decodeReply(b []byte) (chunkReply, error) {
	var r chunkReply
	if len(b) < replyHeadLen || [4]byte(b[0:4]) != replyMagic {
		return r, fmt.Errorf("%w: not a snapshot reply frame (%d bytes)", ErrProtocol, len(b))
	}
	if b[4] != wireVersion {
		return r, fmt.Errorf("%w: reply version %d, want %d", ErrProtocol, b[4], wireVersion)
	}
	r.status, r.format = b[5], b[6]
	r.id = snapID(b[8:24])
	r.seq = binary.BigEndian.Uint32(b[24:28])
	r.total = binary.BigEndian.Uint32(b[28:32])
	r.size = binary.BigEndian.Uint64(b[32:40])
	r.sum = [32]byte(b[40:72])
	r.body = b[replyHeadLen:]
	return r, nil
}

// errorReply builds a status-error reply carrying msg.
func errorReply(id snapID, seq uint32, msg string) []byte {
	r := chunkReply{status: statusError, id: id, seq: seq, body: []byte(msg)}
	return r.encode()
}
