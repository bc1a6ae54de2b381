package mockworker

import (
	"context"
	"sync"
	"time"
)

// Clock is the worker's source of time. The worker reads Now to place requests on its model
// timeline and calls Sleep to let simulated work take time. Implementations must be safe for
// concurrent use.
type Clock interface {
	Now() time.Time
	// Sleep returns after d has passed on this clock, or early with ctx.Err() when ctx ends.
	// d <= 0 returns at once (still reporting a done ctx).
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is wall-clock time; Sleep uses a timer.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits on a timer or ctx.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ManualClock is a clock that only moves when told to. In manual mode (NewManualClock) Sleep
// blocks until Advance moves the clock past the sleeper's deadline, and Waiters lets a test
// see that a goroutine has reached its sleep. In instant mode (NewInstantClock) Sleep moves
// the clock forward by d itself and returns at once: simulated work costs no wall time, which
// suits sequential tests and benchmarks (concurrent sleepers then each advance the shared
// clock, so overlapping work is serialised in time).
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	instant bool
	waiters []*waiter
}

type waiter struct {
	at   time.Time
	done chan struct{}
}

// NewManualClock returns a manual clock reading start.
func NewManualClock(start time.Time) *ManualClock { return &ManualClock{now: start} }

// NewInstantClock returns a clock reading start whose Sleep advances it.
func NewInstantClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, instant: true}
}

// Now returns the clock's current reading.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep waits until the clock reaches now+d (manual mode) or advances it by d (instant mode).
func (c *ManualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	c.mu.Lock()
	if c.instant {
		c.now = c.now.Add(d)
		c.mu.Unlock()
		return nil
	}
	w := &waiter{at: c.now.Add(d), done: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		c.remove(w)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Advance moves the clock forward by d and wakes every sleeper whose deadline has passed.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			close(w.done)
			continue
		}
		kept = append(kept, w)
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

// Waiters returns how many goroutines are blocked in Sleep.
func (c *ManualClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// remove drops w from the waiter list (c.mu held).
func (c *ManualClock) remove(w *waiter) {
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			return
		}
	}
}
