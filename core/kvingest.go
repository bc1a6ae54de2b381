package core

import (
	"context"
	"strconv"
	"sync"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/bus/kvlisten"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/kvwire"
)

// kvIngest owns the KV-event listeners: one ZMQ SUB per (worker, global DP rank), reconciled
// against the catalog after every worker change. A rank whose event and replay endpoints are
// unchanged keeps its listener (and so its sequence watermark); a changed rank gets a fresh one.
//
// Concurrency: mu guards the listener map. It is never held while taking Service.mu, and
// listener handlers take only Service.mu, so there is no lock-order cycle.
type kvIngest struct {
	svc  *Service
	gate chan struct{} // closed once startup recovery has been submitted
	mu   sync.Mutex
	subs map[uint64]map[uint32]*rankListener // worker id → global DP rank → listener
	// closed is set by close; later reconciliations start nothing (guarded by mu).
	closed   bool
	gateOnce sync.Once
	ctx      context.Context
	stop     context.CancelFunc
	book     listenerBook // started listeners by endpoint (kvingest_limits.go; guarded by mu)
}

// rankListener is one rank's listener and its decoding state.
//
// Concurrency: src is written once, before the listener starts, and only read afterwards (by
// the handler goroutine without a lock, by reconcile and status under kvIngest.mu). Its
// Partition and BlockSize fields may go stale when a PATCH changes the partition's shape; no
// reader uses them. dec, b and evs belong to the handler goroutine.
type rankListener struct {
	src      engine.EventSource
	l        *kvlisten.Listener // nil when kvlisten.Start failed; startErr says why
	startErr error
	dec      *kvevents.Decoder // used only by the listener's handler goroutine
	b        kvevents.Batch
	evs      []engine.KVEvent
	svc      *Service
}

// EnableKVEvents starts KV-event ingestion: from now on every schedulable worker's ranks get
// listeners. Batches are received at once but applied only after OpenGate (startup recovery
// must be submitted first). It is a no-op when use_kv_events is false.
func (s *Service) EnableKVEvents() {
	if !s.cfg.Engine.UseKVEvents {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	kv := &kvIngest{svc: s, gate: make(chan struct{}), subs: make(map[uint64]map[uint32]*rankListener), ctx: ctx, stop: cancel}
	s.mu.Lock()
	s.kv = kv
	ids := make([]uint64, 0)
	for _, r := range s.eng.Workers("", "") {
		ids = append(ids, r.WorkerID)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.reconcileListeners(id)
	}
}

// OpenGate lets listeners apply the batches they buffered; call it once startup recovery has
// been submitted to the engine.
func (s *Service) OpenGate() {
	s.mu.Lock()
	kv := s.kv
	s.mu.Unlock()
	if kv != nil {
		kv.gateOnce.Do(func() { close(kv.gate) })
	}
}

// reconcileListeners makes worker id's listeners match its catalog record.
func (s *Service) reconcileListeners(id uint64) {
	s.mu.Lock()
	kv := s.kv
	var want []engine.EventSource
	if kv != nil {
		want = s.eng.EventSources(id)
	}
	s.mu.Unlock()
	if kv == nil {
		return
	}
	kv.reconcile(id, want)
}

func (kv *kvIngest) reconcile(id uint64, want []engine.EventSource) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if kv.closed {
		return
	}
	ranks := kv.subs[id]
	if ranks == nil {
		ranks = make(map[uint32]*rankListener, len(want))
	}
	keep := make(map[uint32]bool, len(want))
	for _, src := range want {
		keep[src.Owner.Rank] = true
		if cur := ranks[src.Owner.Rank]; cur != nil {
			if cur.src.Endpoint == src.Endpoint && cur.src.ReplayEndpoint == src.ReplayEndpoint {
				// The listener and its watermark stay. cur.src is not rewritten: the handler
				// goroutine reads it without a lock, and the fields it uses (Owner, endpoints)
				// are equal by this very condition.
				continue
			}
			kv.noteClosed(cur)
			cur.closeListener()
			delete(ranks, src.Owner.Rank)
		}
		rl := &rankListener{src: src, dec: kvevents.NewDecoder(), svc: kv.svc}
		if err := kv.admitListener(src); err != nil {
			kv.svc.log.Warn("KV-event listener refused", "worker_id", src.Owner.Worker, "dp_rank", src.Owner.Rank, "err", err)
			rl.startErr = err
			ranks[src.Owner.Rank] = rl
			continue
		}
		l, err := kvlisten.Start(kv.ctx, kvlisten.Config{
			Endpoint: src.Endpoint, ReplayEndpoint: src.ReplayEndpoint, Handler: rl,
			Logger: kv.svc.log.With("worker_id", src.Owner.Worker, "dp_rank", src.Owner.Rank),
			Gate:   kv.gate,
		})
		if err != nil {
			// The engine's endpoint check passed but kvlisten's stricter one did not (e.g. an
			// invalid IPv6 literal). Keep the rank with its error so that GET /workers and
			// /metrics show a failed listener instead of nothing; the same endpoints would fail
			// again, so it is retried only when they change.
			kv.svc.log.Error("cannot start KV-event listener", "worker_id", src.Owner.Worker, "dp_rank", src.Owner.Rank, "err", err)
			rl.startErr = err
		}
		rl.l = l
		kv.noteStarted(rl)
		ranks[src.Owner.Rank] = rl
	}
	for r, rl := range ranks {
		if !keep[r] {
			kv.noteClosed(rl)
			rl.closeListener()
			delete(ranks, r)
		}
	}
	if len(ranks) == 0 {
		delete(kv.subs, id)
	} else {
		kv.subs[id] = ranks
	}
}

// status reports the listeners of one worker, keyed by decimal rank.
func (kv *kvIngest) status(id uint64) map[string]ListenerStatus {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	var out map[string]ListenerStatus
	for r, rl := range kv.subs[id] {
		st := rl.state()
		ls := ListenerStatus{Endpoint: rl.src.Endpoint, Status: st.Status.String(), LastError: st.LastError}
		if st.HasWatermark {
			w := st.Watermark
			ls.Watermark = &w
		}
		if out == nil {
			out = make(map[string]ListenerStatus)
		}
		out[strconv.FormatUint(uint64(r), 10)] = ls
	}
	return out
}

// statusCounts counts listeners by status.
func (kv *kvIngest) statusCounts() map[string]int {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	out := map[string]int{}
	for _, ranks := range kv.subs {
		for _, rl := range ranks {
			out[rl.state().Status.String()]++
		}
	}
	return out
}

func (kv *kvIngest) close() {
	kv.stop()
	kv.mu.Lock()
	subs := kv.subs
	kv.subs = map[uint64]map[uint32]*rankListener{}
	kv.closed = true
	kv.mu.Unlock()
	for _, ranks := range subs {
		for _, rl := range ranks {
			rl.closeListener()
		}
	}
}

// state returns the rank's listener state; a rank whose listener could not be started reports
// failed with the construction error.
func (rl *rankListener) state() kvlisten.State {
	if rl.l == nil {
		return kvlisten.State{Status: kvlisten.StatusFailed, LastError: rl.startErr.Error()}
	}
	return rl.l.State()
}

// closeListener stops the rank's listener, if one was started.
func (rl *rankListener) closeListener() {
	if rl.l != nil {
		_ = rl.l.Close()
	}
}

// withListeners adds listener state to a catalog record.
func (s *Service) withListeners(rec WorkerRecord) WorkerRecord {
	s.mu.Lock()
	kv := s.kv
	s.mu.Unlock()
	if kv != nil {
		rec.Listeners = kv.status(rec.WorkerID)
	}
	return rec
}

// Apply decodes one batch and applies it to the engine (called from the listener's goroutine).
// A decoding failure is returned so the listener does not advance its watermark.
func (rl *rankListener) Apply(_ uint64, payload []byte, _ bool) error {
	if err := rl.dec.Decode(payload, &rl.b); err != nil {
		rl.svc.mu.Lock()
		rl.svc.kvUndecodable++
		rl.svc.mu.Unlock()
		return err
	}
	owner := rl.src.Owner
	if rl.b.HasDPRank && rl.b.DPRank >= 0 {
		owner.Rank = uint32(rl.b.DPRank)
	}
	rl.evs = translate(rl.evs[:0], rl.b.Events)
	rl.svc.ApplyKVEvents(owner, rl.evs)
	return nil
}

// Restarted drops the rank's stale ownership when its publisher restarted.
func (rl *rankListener) Restarted(prev, seq uint64) {
	rl.svc.log.Info("KV-event publisher restarted; dropping its stale blocks",
		"worker_id", rl.src.Owner.Worker, "dp_rank", rl.src.Owner.Rank, "previous_seq", prev, "seq", seq)
	rl.svc.ClearRankBlocks(rl.src.Owner)
}

// translate converts decoded wire events into engine events, dropping those the indexer must
// ignore (non-main attention groups). The result aliases the batch's storage.
func translate(dst []engine.KVEvent, evs []kvevents.Event) []engine.KVEvent {
	for i := range evs {
		ev := &evs[i]
		if !ev.Indexable() {
			continue
		}
		out := engine.KVEvent{Tier: ev.Medium}
		switch ev.Kind {
		case kvevents.KindBlockStored:
			out.Kind = engine.KVStored
			out.BlockHashes, out.Parent, out.HasParent = ev.BlockHashes, ev.Parent, ev.HasParent
			out.TokenIDs, out.BlockSize, out.Eagle = ev.TokenIDs, ev.BlockSize, ev.Eagle
			out.LoraName, out.CacheSalt, out.MMHashes = ev.LoraName, ev.CacheSalt, ev.MMHashes
		case kvevents.KindBlockRemoved:
			out.Kind = engine.KVRemoved
			out.BlockHashes = ev.BlockHashes
		case kvevents.KindAllBlocksCleared:
			out.Kind = engine.KVCleared
		default:
			continue
		}
		dst = append(dst, out)
	}
	return dst
}

// ApplyKVEvents applies one rank's batch of KV events (the listeners' entry point; embedders
// with their own event transport may call it directly).
func (s *Service) ApplyKVEvents(o kvwire.Owner, evs []engine.KVEvent) engine.KVApplyStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.eng.ApplyKVEvents(o, evs)
	s.kvStats.Add(st)
	s.kvBatches++
	return st
}

// ClearRankBlocks drops every indexed block of one rank.
func (s *Service) ClearRankBlocks(o kvwire.Owner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eng.ClearOwnerBlocks(o)
}
