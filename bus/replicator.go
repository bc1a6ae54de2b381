package bus

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Config configures a [Replicator]. Only Cluster and ReplicaID are
// required; zero values elsewhere take the defaults noted.
type Config struct {
	// Cluster scopes all subjects; replicas with different clusters never
	// see each other. See [ValidateCluster].
	Cluster string
	// ReplicaID is this replica's opaque identity (e.g. "tcp://host:9092").
	ReplicaID string
	// Aliases are the other ids clients may use for this replica, announced in heartbeats
	// so that peers registered under any of them match (aliases.go). At most MaxAliases.
	Aliases []string
	// BootID identifies this process incarnation; 0 draws a random one.
	BootID uint64
	// HTTPAddr is announced in heartbeats (peers use it for /dump recovery).
	HTTPAddr string
	// StartedAt is announced in heartbeats; zero means "now" at New.
	StartedAt time.Time

	// Peers are the initial configured peers (--replica-sync-peers).
	// Lifecycle and affinity events are applied only from peers.
	Peers []string
	// DiscoverPeers makes every live member (a replica whose heartbeats
	// arrive) count as a peer, in addition to the configured ones.
	DiscoverPeers bool

	// HeartbeatInterval is the mean time between heartbeats (±10% jitter);
	// default 1 s. MissedBeats is how many intervals of silence expire a
	// member; default 5.
	HeartbeatInterval time.Duration
	MissedBeats       int
	// DeadAfter, when positive, overrides MissedBeats × HeartbeatInterval as the silence after
	// which a member expires (a dead peer or a network black hole: core then releases the
	// bookings it mirrors from that peer, and asks for them again when it returns).
	DeadAfter time.Duration
	// MaxMembers bounds the live members table (default DefaultMaxMembers); heartbeats of new
	// ids beyond it are dropped and counted in Stats.MembersRejected.
	MaxMembers int

	// LegacyV1 keeps the unauthenticated v1 subjects working for a mixed-version rollout:
	// every message is also published on its v1 subject, and v1 messages are accepted from
	// replica ids never heard on their own v2 subject. Off, v1 messages are dropped and
	// counted (Stats.*.V1Refused). See subjects_v2.go and README "Bus authentication".
	LegacyV1 bool

	// Queue capacities. OutboundQueue (default 65536) holds events waiting
	// to be published, shared by lifecycle and affinity. LifecycleQueue
	// (default 100000, Dynamo's value) and AffinityQueue (default 4096)
	// hold received events waiting for their callback. Full queues drop.
	OutboundQueue  int
	LifecycleQueue int
	AffinityQueue  int

	// Callbacks. All of them run on one dispatcher goroutine owned by the
	// Replicator, never concurrently with each other, in arrival order per
	// queue (a peer's restart notice is delivered before that peer's first
	// event from the new boot). Each callback owns the value it receives.
	// They should return quickly: while one runs, received events queue up
	// and are dropped once the queue is full. They may call any Replicator
	// method except Close.
	OnLifecycle func(ev *Lifecycle)
	OnLiveSet   func(ls *LiveSet) // in order with OnLifecycle (same subject, same queue)
	// OnResyncRequest is called when a peer asks this replica to republish its admissions.
	OnResyncRequest func(from string)
	OnAffinity      func(a *Affinity)
	OnPeerRestart   func(id string, prevBoot, newBoot uint64)
	OnMemberChange  func(c MemberChange)
}

const (
	defaultHeartbeat      = time.Second
	defaultOutboundQueue  = 1 << 16
	defaultLifecycleQueue = 100_000
	defaultAffinityQueue  = 4096
	closeFlushTimeout     = 2 * time.Second
)

// ErrConfig is returned by New for an invalid [Config].
var ErrConfig = errors.New("bus: invalid replicator config")

// NewBootID returns a random non-zero 64-bit boot id.
func NewBootID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
		return id
	}
	return 1
}

// Replicator is the replica clustering endpoint the core service uses: it
// publishes this replica's lifecycle and affinity events, heartbeats and
// leave message, and delivers its peers' events and membership changes to
// the configured callbacks.
//
// Concurrency: every exported method is safe for concurrent use. The
// Replicator owns three kinds of goroutines: one publisher (drains the
// outbound queue and sends heartbeats), one dispatcher (runs callbacks),
// and the transport's subscription goroutines (decode and filter, then
// enqueue without blocking). Close stops them all.
//
// Lock order: orderMu, then mu. mu is a leaf lock, never held while
// enqueueing, publishing or calling back; orderMu is never taken by the
// dispatcher or by any exported method.
type Replicator struct {
	cfg       Config
	subjects  Subjects
	tr        Transport
	log       *slog.Logger
	boot      uint64
	startedAt int64

	// out is the outbound queue; sendMu (read side) is held while sending
	// to it so that Close (write side) can fence off late publishers.
	sendMu sync.RWMutex
	closed bool // guarded by sendMu
	out    chan Message

	inLC chan inbound   // lifecycle events and control notices, FIFO
	inAF chan *Affinity // affinity events

	// orderMu serialises "decide, then enqueue" on the inbound side (see
	// replicator_inbound.go). Lock order: orderMu before mu.
	orderMu sync.Mutex

	mu      sync.Mutex
	peers   map[string]struct{} // configured peers; guarded by mu
	members *Members            // guarded by mu

	subsMu          sync.Mutex
	subs            []Subscription // guarded by subsMu
	snapshotServing bool           // guarded by subsMu
	snapWG          sync.WaitGroup // snapshot requests being handled (see ServeSnapshot)

	// own v2 subjects, precomputed (the publisher sends on nothing else but v1 and replies).
	ownLifecycle, ownAffinity, ownMembers string

	st       replicatorCounters
	logLimit *LogLimiter // membership INFO lines

	stopPub   chan struct{} // closed by Close to stop the publisher
	done      chan struct{} // closed by Close to stop the dispatcher
	pubDone   chan struct{}
	dispDone  chan struct{}
	closeOnce sync.Once
}

// inbound is one item of the lifecycle queue: an event or a control notice.
type inbound struct {
	lc      *Lifecycle
	ls      *LiveSet
	rr      *ResyncRequest
	restart *restartNotice
	change  *MemberChange
}

type restartNotice struct {
	id         string
	prev, boot uint64
}

// New builds a Replicator over a NATS connection it does not own (close it
// after Close). See [NewWithTransport].
func New(cfg Config, nc *nats.Conn, log *slog.Logger) (*Replicator, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrConfig)
	}
	return NewWithTransport(cfg, NewNATSTransport(nc), log)
}

// NewWithTransport validates cfg, subscribes to the cluster's lifecycle,
// affinity and members subjects, flushes (best-effort: a replica may start
// while NATS is unreachable) and starts the publisher and dispatcher. The
// first heartbeat goes out immediately. log may be nil.
func NewWithTransport(cfg Config, tr Transport, log *slog.Logger) (*Replicator, error) {
	subjects, err := NewSubjects(cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if err := ValidateReplicaID(cfg.ReplicaID); err != nil {
		return nil, fmt.Errorf("%w: replica id: %w", ErrConfig, err)
	}
	if err := normalizeAliases(&cfg); err != nil {
		return nil, err
	}
	log = cmp.Or(log, slog.New(slog.DiscardHandler))
	cfg.HeartbeatInterval = orDefault(cfg.HeartbeatInterval, defaultHeartbeat)
	cfg.OutboundQueue = orDefault(cfg.OutboundQueue, defaultOutboundQueue)
	cfg.LifecycleQueue = orDefault(cfg.LifecycleQueue, defaultLifecycleQueue)
	cfg.AffinityQueue = orDefault(cfg.AffinityQueue, defaultAffinityQueue)
	if cfg.BootID == 0 {
		cfg.BootID = NewBootID()
	}
	if cfg.StartedAt.IsZero() {
		cfg.StartedAt = time.Now()
	}
	r := &Replicator{
		cfg: cfg, subjects: subjects, tr: tr, boot: cfg.BootID, startedAt: cfg.StartedAt.UnixNano(),
		log:      log.With("component", "replicator", "replica", cfg.ReplicaID),
		out:      make(chan Message, cfg.OutboundQueue),
		inLC:     make(chan inbound, cfg.LifecycleQueue),
		inAF:     make(chan *Affinity, cfg.AffinityQueue),
		peers:    make(map[string]struct{}),
		members:  NewMembers(cfg.HeartbeatInterval, cfg.MissedBeats),
		logLimit: NewLogLimiter(0, 0),
		stopPub:  make(chan struct{}),
		done:     make(chan struct{}),
		pubDone:  make(chan struct{}),
		dispDone: make(chan struct{}),
	}
	r.ownLifecycle, r.ownAffinity, r.ownMembers = subjects.LifecycleFrom(cfg.ReplicaID),
		subjects.AffinityFrom(cfg.ReplicaID), subjects.MembersFrom(cfg.ReplicaID)
	r.members.SetExpiryAfter(cfg.DeadAfter)
	r.members.SetMaxLive(cfg.MaxMembers)
	for _, p := range cfg.Peers {
		if err := ValidateReplicaID(p); err != nil {
			return nil, fmt.Errorf("%w: peer: %w", ErrConfig, err)
		}
		if !r.IsSelf(p) {
			r.peers[p] = struct{}{}
		}
	}
	// v2 subjects (sender in the subject) always; v1 subjects too, so that legacy traffic is
	// applied (LegacyV1) or at least counted as refused.
	for subj, h := range map[string]Handler{
		subjects.LifecycleAll(): r.lifecycleHandler(false),
		subjects.AffinityAll():  r.affinityHandler(false),
		subjects.MembersAll():   r.membersHandler(false),
		subjects.Lifecycle():    r.lifecycleHandler(true),
		subjects.Affinity():     r.affinityHandler(true),
		subjects.Members():      r.membersHandler(true),
	} {
		sub, err := tr.Subscribe(subj, h)
		if err != nil {
			r.unsubscribeAll()
			return nil, err
		}
		r.subs = append(r.subs, sub)
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
	if err := tr.Flush(ctx); err != nil {
		r.log.Warn("initial flush failed; subscriptions take effect on connect", "err", err)
	}
	cancel()
	go r.dispatch()
	go r.publishLoop(mrand.New(mrand.NewPCG(r.boot, uint64(r.startedAt))))
	return r, nil
}

// ReplicaID returns this replica's id.
func (r *Replicator) ReplicaID() string { return r.cfg.ReplicaID }

// BootID returns this process's boot id.
func (r *Replicator) BootID() uint64 { return r.boot }

// Subjects returns the cluster's subjects.
func (r *Replicator) Subjects() Subjects { return r.subjects }

// Transport returns the transport (for the snapshot protocol, later).
func (r *Replicator) Transport() Transport { return r.tr }

// AddPeer adds id to the configured peers. It returns false if id was
// already a peer, is this replica's own id or alias, or is not a valid replica id.
func (r *Replicator) AddPeer(id string) (added bool) {
	if r.IsSelf(id) || ValidateReplicaID(id) != nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.peers[id]; ok {
		return false
	}
	r.peers[id] = struct{}{}
	return true
}

// RemovePeer removes id from the configured peers and reports whether it
// was one. With DiscoverPeers a live member still counts as a peer.
func (r *Replicator) RemovePeer(id string) (removed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.peers[id]; !ok {
		return false
	}
	delete(r.peers, id)
	return true
}

// Peers returns the configured peers, sorted (what GET
// /replica_sync/peers reports). Discovered members are in [Replicator.Members].
func (r *Replicator) Peers() []string {
	r.mu.Lock()
	out := make([]string, 0, len(r.peers))
	for p := range r.peers {
		out = append(out, p)
	}
	r.mu.Unlock()
	slices.Sort(out)
	return out
}

// Members returns the live members (other replicas whose heartbeats
// arrive), sorted by id.
func (r *Replicator) Members() []Member {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.members.Live()
}

// isPeerLocked reports whether events from id are applied. r.mu held.
func (r *Replicator) isPeerLocked(id string) bool {
	if _, ok := r.peers[id]; ok {
		return true
	}
	return r.cfg.DiscoverPeers && r.members.IsLive(id) || r.aliasPeerLocked(id)
}

// Close publishes what is still queued (best-effort), sends a leave
// heartbeat, unsubscribes and stops all goroutines. Events submitted after
// Close starts are dropped and counted. It does not close the transport.
// Calling it again is a no-op. It must not be called from a callback.
func (r *Replicator) Close() error {
	r.closeOnce.Do(func() {
		r.sendMu.Lock()
		r.closed = true
		r.sendMu.Unlock()
		close(r.stopPub)
		<-r.pubDone
		ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
		if err := r.tr.Flush(ctx); err != nil {
			r.log.Debug("flush on close failed", "err", err)
		}
		cancel()
		r.unsubscribeAll()
		r.snapWG.Wait() // snapshot requests still being answered
		close(r.done)
		<-r.dispDone
	})
	return nil
}

func (r *Replicator) unsubscribeAll() {
	r.subsMu.Lock()
	subs := r.subs
	r.subs = nil
	r.subsMu.Unlock()
	for _, s := range subs {
		if err := s.Unsubscribe(); err != nil {
			r.log.Debug("unsubscribe failed", "err", err)
		}
	}
}

// StreamStats counts one message stream of a [Replicator].
type StreamStats struct {
	Published       uint64 // handed to the transport without error
	PublishErrors   uint64 // transport refused (disconnected, closed, too large...)
	OutboundDropped uint64 // outbound queue full, or submitted after Close
	Received        uint64 // accepted from a peer and queued for the callback
	InboundDropped  uint64 // inbound queue full
	Echoes          uint64 // our own messages coming back
	NotPeer         uint64 // from replicas that are not peers
	StaleBoot       uint64 // from a retired boot id of the sender
	DecodeErrors    uint64 // undecodable or unknown-type payloads
	// Impersonations: envelopes whose sender is not the one their v2 subject names.
	Impersonations uint64
	// V1Refused: messages on v1 subjects dropped because LegacyV1 is off.
	V1Refused uint64
	// Unauthenticated: v1 messages for a replica id already heard on its own v2 subject.
	Unauthenticated uint64
}

// Stats is a snapshot of a Replicator's counters.
type Stats struct {
	Lifecycle  StreamStats
	Affinity   StreamStats
	Heartbeats StreamStats // Received counts beats and leaves from others
	Restarts   uint64      // restart notices delivered for peers
	Peers      int         // configured peers
	Members    int         // live members
	// MembersRejected counts heartbeats of new ids refused because the members table was full.
	MembersRejected uint64
	// LogsSuppressed counts membership log lines dropped by the rate limit.
	LogsSuppressed uint64
}

type streamCounters struct {
	published, publishErrors, outboundDropped, received, inboundDropped,
	echoes, notPeer, staleBoot, decodeErrors,
	impersonations, v1Refused, unauthenticated atomic.Uint64
}

func (c *streamCounters) snapshot() StreamStats {
	return StreamStats{
		Published: c.published.Load(), PublishErrors: c.publishErrors.Load(),
		OutboundDropped: c.outboundDropped.Load(), Received: c.received.Load(),
		InboundDropped: c.inboundDropped.Load(), Echoes: c.echoes.Load(), NotPeer: c.notPeer.Load(),
		StaleBoot: c.staleBoot.Load(), DecodeErrors: c.decodeErrors.Load(),
		Impersonations: c.impersonations.Load(), V1Refused: c.v1Refused.Load(), Unauthenticated: c.unauthenticated.Load(),
	}
}

type replicatorCounters struct {
	lifecycle, affinity, heartbeats streamCounters
	restarts                        atomic.Uint64
}

// Stats returns a snapshot of the counters.
func (r *Replicator) Stats() Stats {
	r.mu.Lock()
	peers, members, rejected := len(r.peers), r.members.Len(), r.members.Rejected()
	r.mu.Unlock()
	return Stats{
		Lifecycle: r.st.lifecycle.snapshot(), Affinity: r.st.affinity.snapshot(),
		Heartbeats: r.st.heartbeats.snapshot(), Restarts: r.st.restarts.Load(),
		Peers: peers, Members: members, MembersRejected: rejected, LogsSuppressed: r.logLimit.Suppressed(),
	}
}
