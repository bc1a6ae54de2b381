package engine

import (
	"math/rand/v2"
	"time"

	"github.com/kvselect/kvselect/core/engine/kvhash"
	"github.com/kvselect/kvselect/kvwire"
)

// Engine is the selection engine: worker catalog, per-partition prefix index and load accounting,
// reservations, the pending-selection cache and the cost function.
//
// The engine is a pure state machine in the style of etcd/raft: it starts no goroutines, does no
// I/O, never reads the clock and uses no global randomness. Time enters as the `now` argument of
// every operation that can age state, and randomness comes from the *rand.Rand given to New.
// Everything the owner must act on — replica lifecycle events and session bindings to publish,
// router-queue admissions to hand to parked callers — collects in one outbox, which the owner
// drains once after each call with TakeReady (etcd raft's Ready).
//
// Concurrency: an Engine is not safe for concurrent use. Its owner (core.Service) serialises every
// call behind one lock.
type Engine struct {
	cfg     Config
	rng     *rand.Rand
	keyed   *kvhash.KeyedScheme // non-nil in keyed-xxh3-v1 mode
	workers map[uint64]*worker
	parts   map[PartitionKey]*partition
	resv    map[string]*reservation
	pending *pendingCache
	out     Ready // the outbox (TakeReady)

	// catalogGen counts catalog changes; derived indexes (stable routing ids) are rebuilt when
	// it moves.
	scoring    Scoring // custom scorers and picker (immutable after New)
	catalogGen uint64
	stable     stableIndex

	// Session affinity: this replica's writer id and the last binding version it issued.
	writerID uint64
	affSeq   uint64

	// recovery holds recovered indexes waiting for their partition (recovery.go).
	recovery recoveryState

	// scratch buffers reused across selections (the engine is single-threaded).
	scratch selectScratch
	dups    []uint64 // scratch of the duplicate-hash check of long stored chains

	// lim is cfg.Limits resolved; bounds holds the bounded tables' counters (limits*.go).
	lim    Limits
	bounds boundState
	// approxList holds the partitions with deferred approximate indexing (approx_steps.go).
	approxList []*partition
	// rq is the router queue and pol its policy classes (rqueue*.go).
	rq  routerQueue
	pol Policies
}

// Options carries what the engine cannot obtain itself.
type Options struct {
	// Rand is the engine's only source of randomness (tie-breaks, softmax draws, random tracking
	// hashes, output-block hashes). Required.
	Rand *rand.Rand
	// TrackingKey is the 32-byte provider key for keyed-xxh3-v1 (read from
	// Config.TrackingKeyFile by the caller, since the engine does no I/O).
	TrackingKey []byte
	// WriterID identifies this replica in session-binding versions (its boot id).
	WriterID uint64
	// Scoring adds custom scorers and a picker (see scoring.go).
	Scoring Scoring
	// Policies are the router policy classes (ParsePolicies of Config.PolicyConfig, read by the
	// caller). nil: only the synthetic class of router_queue_threshold and router_queue_policy.
	Policies *Policies
}

// New returns an engine with the given configuration, which must have passed Validate.
func New(cfg Config, opts Options) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := opts.Scoring.Validate(); err != nil {
		return nil, err
	}
	if opts.Rand == nil {
		opts.Rand = rand.New(rand.NewPCG(1, 2))
	}
	e := &Engine{
		cfg:      cfg,
		rng:      opts.Rand,
		workers:  make(map[uint64]*worker),
		parts:    make(map[PartitionKey]*partition),
		resv:     make(map[string]*reservation),
		writerID: opts.WriterID,
		scoring:  opts.Scoring,
		pending:  newPendingCache(cfg.SelectionCacheTTL, cfg.SelectionCacheMaxEntries, cfg.SelectionCacheMaxBytes),
		lim:      cfg.Limits.resolved(),
	}
	e.bounds.perWorker = make(map[uint64]int)
	e.rq = newRouterQueue(time.Time{})
	if opts.Policies != nil {
		e.pol = *opts.Policies
	}
	e.pol.synthetic = syntheticProfile(&cfg)
	if cfg.TrackingHash == TrackingKeyed {
		k, err := kvhash.NewKeyedScheme(opts.TrackingKey, cfg.TrackingKeyID)
		if err != nil {
			return nil, err
		}
		e.keyed = k
	}
	return e, nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// LifecycleKind is the kind of a replicated lifecycle event.
type LifecycleKind uint8

// Replicated lifecycle kinds. Output-block updates are never replicated.
const (
	LifecycleAdd LifecycleKind = iota + 1
	LifecyclePrefillComplete
	LifecycleFree
)

// ReplicaEvent is a booking lifecycle change to publish to (or received from) peer replicas.
type ReplicaEvent struct {
	Partition PartitionKey
	BlockSize uint32
	RequestID string
	Owner     kvwire.Owner
	Kind      LifecycleKind
	// Add is set for LifecycleAdd.
	Add *ReplicaAdd
	// Sender is the publishing replica's id on received events (empty on outbound ones).
	Sender string
}

// ReplicaAdd carries an admission's booking inputs.
type ReplicaAdd struct {
	TokenSequence        []uint64 // tracking hashes
	TrackPrefill         bool
	PrefillTokens        uint64
	ExpectedOutputTokens *uint32
	LoraName             string
	ISL                  uint64
	// Republish marks an anti-entropy copy of an earlier admission (core's resync), not a new
	// booking.
	Republish bool
}

// Ready is the engine's outbox: what the calls since the last TakeReady produced, in order.
type Ready struct {
	Replica  []ReplicaEvent  // booking lifecycle changes to publish to peers
	Affinity []AffinityEvent // session bindings to publish to peers
	Admitted []Admission     // router-queue outcomes to hand to parked callers (rqueue_admit.go)
}

// TakeReady moves the outbox into dst and empties it. dst's previous contents are dropped and
// its buffers reused by the engine, so what dst holds is the caller's until its next TakeReady.
func (e *Engine) TakeReady(dst *Ready) {
	clear(dst.Replica)
	clear(dst.Affinity)
	clear(dst.Admitted)
	*dst, e.out = e.out, Ready{dst.Replica[:0], dst.Affinity[:0], dst.Admitted[:0]}
}

// TakeEffects is TakeReady for owners that act on replica events only: it appends them to dst.
func (e *Engine) TakeEffects(dst []ReplicaEvent) []ReplicaEvent {
	var r Ready
	e.TakeReady(&r)
	return append(dst, r.Replica...)
}

func (e *Engine) emit(ev ReplicaEvent) { e.out.Replica = append(e.out.Replica, ev) }

// Sweep reclaims what has aged out at now: bookings older than the expiry guard (their frees are
// published), approximate-index entries past their TTL, and stale pending selections. It returns
// the number of bookings it freed. Partitions are swept in key order and each partition's
// expired bookings in (admission time, id) order, so the frees are published in an order that
// does not depend on map iteration.
func (e *Engine) Sweep(now time.Time) int {
	cutoff := now.Add(-e.cfg.ActiveRequestExpiry).UnixNano()
	freed := 0
	var ids []string
	for _, key := range e.DumpPartitionKeys() {
		p := e.parts[key]
		ids = p.tracker.Expire(cutoff, ids[:0])
		for _, id := range ids {
			freed++
			r := e.resv[id]
			e.delRow(id)
			if r != nil {
				p.releaseSession(r.session)
			}
			if r != nil && !r.fromPeer {
				e.emit(ReplicaEvent{Partition: p.key, BlockSize: p.blockSize, RequestID: id, Owner: r.owner, Kind: LifecycleFree})
			}
		}
		if p.approx != nil {
			p.approx.expire(p.index, now.UnixNano())
		}
		if p.predicted != nil {
			p.predicted.expire(now.UnixNano())
		}
		p.sweepSessions(now.UnixNano(), e.cfg.SessionAffinityTTL)
	}
	e.pending.expire(now)
	return freed
}
