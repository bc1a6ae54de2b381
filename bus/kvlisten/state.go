package kvlisten

import (
	"strings"
	"sync"
)

// Status is the coarse health of a Listener.
type Status int

const (
	// StatusPending: not yet connected, or connected while the gate is
	// still closed (batches are buffered, none applied).
	StatusPending Status = iota
	// StatusActive: connected and applying batches.
	StatusActive
	// StatusFailed: the last dial attempt failed or the connection broke;
	// the listener keeps retrying and State.LastError says why.
	StatusFailed
	// StatusClosed: Close was called or the Start context ended.
	StatusClosed
)

// String returns the lower-case name used in logs and the HTTP API.
func (s Status) String() string {
	switch s {
	case StatusPending:
		return "pending"
	case StatusActive:
		return "active"
	case StatusFailed:
		return "failed"
	case StatusClosed:
		return "closed"
	}
	return "unknown"
}

// State is a point-in-time copy of a Listener's status and counters. All
// counters are cumulative over the Listener's life.
type State struct {
	Status    Status
	LastError string // most recent dial/receive error; kept after recovery
	// Watermark is the highest applied sequence number of the current
	// publisher incarnation; meaningful only when HasWatermark.
	Watermark    uint64
	HasWatermark bool

	Batches     uint64 // batches applied successfully (live and replayed)
	Replayed    uint64 // of Batches, those that came from replay
	Gaps        uint64 // forward jumps detected (S > W+1, or first S > 0)
	Lost        uint64 // batches known to be missing after repair attempts
	Stale       uint64 // live batches skipped because S <= W (not a restart)
	Restarts    uint64 // publisher restarts detected
	Undecodable uint64 // Apply calls that returned an error
	Malformed   uint64 // messages dropped for their frame shape
	Overflowed  uint64 // batches dropped because the gate buffer was full
	Replays     uint64 // replay requests sent
	ReplayFails uint64 // replay requests that ended incomplete or failed
	Connects    uint64 // successful SUB connections (first one included)
	// Buffered is the number of batches currently held while the gate is
	// closed (not cumulative).
	Buffered int
	// QueuedBytes is the payload the receiver queued for the processor and
	// that is not yet handled or gate-buffered (at most Config.QueueBytes;
	// not cumulative; 0 once closed).
	QueuedBytes int64
}

// stateBox guards the published State. The receiver goroutine writes the
// connection fields, the processor goroutine the sequence fields and
// counters; readers copy under the same mutex.
type stateBox struct {
	mu        sync.Mutex
	s         State
	connected bool
	gateOpen  bool
	closed    bool
}

// snapshot returns a copy with Status derived from the connection flags.
func (b *stateBox) snapshot() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.s
	switch {
	case b.closed:
		s.Status = StatusClosed
	case b.connected && b.gateOpen:
		s.Status = StatusActive
	case !b.connected && s.LastError != "":
		s.Status = StatusFailed
	default:
		s.Status = StatusPending
	}
	return s
}

// update runs f with the lock held.
func (b *stateBox) update(f func(s *State)) {
	b.mu.Lock()
	f(&b.s)
	b.mu.Unlock()
}

func (b *stateBox) setConnected(ok bool, err error) {
	b.mu.Lock()
	b.connected = ok
	if ok {
		b.s.Connects++
	}
	if err != nil {
		b.s.LastError = publicSchemes(err.Error())
	}
	b.mu.Unlock()
}

// publicSchemes rewrites the package's private transport schemes (see transport.go) back to the
// tcp:// and ipc:// endpoints operators registered, so that errors shown in GET /workers name
// what they configured.
func publicSchemes(msg string) string {
	msg = strings.ReplaceAll(msg, schemeTCP+"://", "tcp://")
	return strings.ReplaceAll(msg, schemeIPC+"://", "ipc://")
}

func (b *stateBox) setGateOpen() {
	b.mu.Lock()
	b.gateOpen = true
	b.mu.Unlock()
}

func (b *stateBox) setClosed() {
	b.mu.Lock()
	b.closed = true
	b.connected = false
	b.mu.Unlock()
}
