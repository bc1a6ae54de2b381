package recovery

import (
	"cmp"
	"errors"
	"strings"

	"github.com/kvselect/kvselect/kvwire"
)

// Sentinel errors. Every error this package returns wraps one of them (and, for transport
// failures, the bus or net/http cause as well).
var (
	// ErrMalformed: the document is not a well-formed /dump (syntax error, truncation, a value of
	// the wrong type where the stream cannot step over it).
	ErrMalformed = errors.New("recovery: malformed dump")
	// ErrTooLarge: a byte, event or partition limit was exceeded.
	ErrTooLarge = errors.New("recovery: dump exceeds limits")
	// ErrPartition: one partition was rejected (the document may still succeed); passed to
	// Sink.Abort and counted in Stats.Rejected.
	ErrPartition = errors.New("recovery: partition rejected")
	// ErrNoPeer: no peer answered with a usable snapshot.
	ErrNoPeer = errors.New("recovery: no peer could be recovered from")
	// ErrPeer: one peer failed (HTTP status, transport, protocol); FetchHTTP and FetchNATS log
	// it and try the next peer.
	ErrPeer = errors.New("recovery: peer failed")
	// ErrDigest: a NATS snapshot's SHA-256 did not match its bytes.
	ErrDigest = errors.New("recovery: snapshot digest mismatch")
	// ErrProtocol: a NATS snapshot reply broke the chunk protocol (bad frame, wrong id or
	// sequence, version mismatch).
	ErrProtocol = errors.New("recovery: snapshot protocol violation")
)

// Partition names one dumped index: the /dump key "<model>:<routing_group>" split at the first
// ':' (model names may not contain ':', routing groups may).
type Partition struct {
	Model string
	Group string
}

// String returns the /dump key.
func (p Partition) String() string { return p.Model + ":" + p.Group }

// ParseKey splits a /dump key at the first ':'. A key without ':' is rejected (spec §11.3).
func ParseKey(key string) (Partition, error) {
	m, g, ok := strings.Cut(key, ":")
	if !ok {
		return Partition{}, errors.New("key has no ':' separating model and routing group")
	}
	return Partition{Model: m, Group: g}, nil
}

// EventKind is the variant of a RouterEvent's data.
type EventKind uint8

// RouterEvent data variants.
const (
	EventStored EventKind = iota + 1
	EventRemoved
	EventCleared
)

// Block is one stored block: BlockHash is the engine's external (sequence) hash, TokensHash the
// local hash of the block's tokens (the radix edge). mm_extra_info is not carried: tokens_hash
// already covers multimodal content.
type Block struct {
	BlockHash  uint64
	TokensHash uint64
}

// RouterEvent is one event of a dumped partition, Dynamo's RouterEvent:
//
//	{"worker_id": u64, "storage_tier": "device"|"host_pinned"|"disk"|"external",
//	 "event": {"event_id": u64, "dp_rank": u32,
//	           "data": {"stored": {"parent_hash": u64|null, "blocks": [{"block_hash", "tokens_hash"}]}}
//	                 | {"removed": {"block_hashes": [u64]}} | "cleared"}}
//
// A RouterEvent handed to Sink.Event is valid only during that call (its slices are reused).
type RouterEvent struct {
	WorkerID  uint64
	DPRank    uint32
	Tier      kvwire.Tier
	EventID   uint64
	Kind      EventKind
	Parent    uint64 // stored: the owner's block the chain hangs under, iff HasParent
	HasParent bool
	Blocks    []Block  // stored
	Removed   []uint64 // removed
}

// Sink receives a dump partition by partition. For each partition the parser calls Begin; if
// Begin returns nil, then zero or more Event calls and exactly one of End or Abort follow. An
// error from Event or End rejects the partition (the parser calls Abort after an Event error,
// not after an End error: End's error is the Sink's own verdict). Calls come from one goroutine.
type Sink interface {
	// Begin starts a partition. An error rejects it (its events are skipped).
	Begin(p Partition) error
	// Event delivers one event of the current partition; ev is only valid during the call.
	Event(ev *RouterEvent) error
	// End completes the current partition; blockSize is its "block_size" (never 0).
	End(blockSize uint32) error
	// Abort discards the current partition; err wraps ErrPartition, ErrMalformed or ErrTooLarge.
	Abort(err error)
}

// Stats describes one parsed (or partially parsed) document.
type Stats struct {
	Bytes      int64 // document bytes read
	Partitions int   // partitions completed (End returned nil)
	Rejected   int   // partitions rejected (Begin/Event/End error or malformed partition)
	Errored    int   // partitions the peer itself reported as {"error": ...}
	Events     int   // events delivered to the Sink in completed partitions
	Blocks     int   // stored blocks in those events
}

// Limits bound what ParseDump accepts. Zero fields take the defaults noted.
type Limits struct {
	// MaxBytes bounds the whole document (default 8 GiB).
	MaxBytes int64
	// MaxEventBytes bounds one event or skipped value, approximately (default 16 MiB).
	MaxEventBytes int64
	// MaxEvents bounds the events of the whole document (default 1<<28).
	MaxEvents int
	// MaxPartitions bounds the partitions of the document (default 65536).
	MaxPartitions int
	// MaxBlocksPerEvent bounds the blocks (or removed hashes) of one event (default 65536).
	MaxBlocksPerEvent int
}

// Default limits.
const (
	DefaultMaxBytes          int64 = 8 << 30
	DefaultMaxEventBytes     int64 = 16 << 20
	DefaultMaxEvents               = 1 << 28
	DefaultMaxPartitions           = 1 << 16
	DefaultMaxBlocksPerEvent       = 1 << 16
)

// withDefaults gives every unset (zero or negative) limit its default.
func (l Limits) withDefaults() Limits {
	l.MaxBytes = cmp.Or(max(l.MaxBytes, 0), DefaultMaxBytes)
	l.MaxEventBytes = cmp.Or(max(l.MaxEventBytes, 0), DefaultMaxEventBytes)
	l.MaxEvents = cmp.Or(max(l.MaxEvents, 0), DefaultMaxEvents)
	l.MaxPartitions = cmp.Or(max(l.MaxPartitions, 0), DefaultMaxPartitions)
	l.MaxBlocksPerEvent = cmp.Or(max(l.MaxBlocksPerEvent, 0), DefaultMaxBlocksPerEvent)
	return l
}
