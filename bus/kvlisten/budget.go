package kvlisten

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// byteBudget bounds the payload bytes between the receiver and the processor. The receiver
// acquires a batch's bytes before queueing it and the processor releases them once the batch
// is handled (or moved into the gate buffer, which has bounds of its own). Besides the batch
// the receiver is reading or waiting to queue, the queue and the Handler call in progress
// therefore hold at most size bytes, except that a batch larger than size counts as size
// (bounded in turn by Config.MaxMessageBytes).
//
// Callers pass 0 ≤ n ≤ size: the receiver clamps a larger batch to size, so one oversized
// batch waits for an empty budget instead of forever. Bytes taken when the listener stops
// are not returned; a Listener is never restarted.
type byteBudget struct {
	size  int64
	sem   *semaphore.Weighted
	inUse atomic.Int64 // for State; follows sem
}

func newByteBudget(size int64) *byteBudget {
	return &byteBudget{size: size, sem: semaphore.NewWeighted(size)}
}

// acquire takes n bytes, waiting until they are free or ctx ends (then it returns ctx's
// error and takes nothing).
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	if err := b.sem.Acquire(ctx, n); err != nil {
		return err
	}
	b.inUse.Add(n)
	return nil
}

// release returns n bytes taken by acquire.
func (b *byteBudget) release(n int64) {
	b.inUse.Add(-n)
	b.sem.Release(n)
}

// used returns the bytes currently taken.
func (b *byteBudget) used() int64 { return b.inUse.Load() }
