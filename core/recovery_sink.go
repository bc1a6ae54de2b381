package core

import (
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/kvwire"
	"github.com/kvselect/kvselect/recovery"
)

// stagingSink turns a recovery stream into engine staging indexes. Every partition is built in
// its own engine.RecoveredIndex without the engine lock (it shares nothing with the engine);
// nothing reaches the engine until commit, which runs only after the whole fetch succeeded, and
// installs partition by partition, each under the lock for O(1) (or a merge replay when the
// partition already has live entries).
//
// Concurrency: used by one goroutine (the recovery parser's), then committed by the caller.
type stagingSink struct {
	svc    *Service
	cur    *engine.RecoveredIndex
	curKey engine.PartitionKey
	staged []stagedPartition
	ev     engine.RouterEvent // scratch, reused per event
}

type stagedPartition struct {
	key engine.PartitionKey
	idx *engine.RecoveredIndex
}

// installReport says what commit installed.
type installReport struct {
	partitions int // partitions installed (replaced, merged or pending)
	entries    int // their (block, owner) entries
	rejected   int // partitions the engine refused (block size clash, poisoned)
}

func newStagingSink(s *Service) *stagingSink { return &stagingSink{svc: s} }

// Begin implements recovery.Sink.
func (k *stagingSink) Begin(p recovery.Partition) error {
	k.cur = engine.NewRecoveredIndex(0)
	k.curKey = engine.PartitionKey{Model: p.Model, Group: p.Group}
	return nil
}

// Event implements recovery.Sink: it translates the wire event and replays it into the staging
// index. A malformed event poisons the partition (the error rejects it).
func (k *stagingSink) Event(ev *recovery.RouterEvent) error {
	e := &k.ev
	e.Owner = kvwire.Owner{Worker: ev.WorkerID, Rank: ev.DPRank}
	e.Tier = ev.Tier
	e.Parent, e.HasParent = ev.Parent, ev.HasParent
	e.Blocks, e.Removed = e.Blocks[:0], nil
	switch ev.Kind {
	case recovery.EventStored:
		e.Kind = engine.RouterStored
		for _, b := range ev.Blocks {
			e.Blocks = append(e.Blocks, engine.RecoveredBlock{External: b.BlockHash, Local: b.TokensHash})
		}
	case recovery.EventRemoved:
		e.Kind = engine.RouterRemoved
		e.Removed = ev.Removed
	case recovery.EventCleared:
		e.Kind = engine.RouterCleared
	default:
		e.Kind = 0 // Apply rejects it
	}
	return k.cur.Apply(e)
}

// End implements recovery.Sink.
func (k *stagingSink) End(blockSize uint32) error {
	k.cur.SetBlockSize(blockSize)
	k.staged = append(k.staged, stagedPartition{key: k.curKey, idx: k.cur})
	k.cur = nil
	return nil
}

// Abort implements recovery.Sink.
func (k *stagingSink) Abort(err error) {
	k.svc.log.Warn("recovered partition rejected", "partition", k.curKey.DumpKey(), "err", err)
	k.cur = nil
}

// Discard implements recovery.StagingSink: the fetch attempt failed.
func (k *stagingSink) Discard(error) {
	k.cur = nil
	clear(k.staged)
	k.staged = k.staged[:0]
}

// commit installs every staged partition, each atomically under the engine lock.
func (k *stagingSink) commit() installReport {
	var rep installReport
	for _, sp := range k.staged {
		entries := sp.idx.Entries()
		s := k.svc
		s.mu.Lock()
		outcome, err := s.eng.InstallRecovered(sp.key, sp.idx)
		s.mu.Unlock()
		if err != nil {
			rep.rejected++
			s.log.Warn("recovered partition not installed", "partition", sp.key.DumpKey(), "err", err)
			continue
		}
		rep.partitions++
		rep.entries += entries
		s.log.Debug("recovered partition installed", "partition", sp.key.DumpKey(), "entries", entries,
			"block_size", sp.idx.BlockSize(), "outcome", outcome.String())
	}
	k.staged = nil
	return rep
}
