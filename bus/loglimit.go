package bus

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// LogLimiter rate-limits a class of log lines: at most Burst lines per Period pass, the rest
// are counted and the count is attached ("suppressed") to the next line that passes. It keeps
// a message storm (100k forged heartbeats, a flapping peer) from turning into as many log lines
// while still saying that something happened.
//
// Concurrency: safe for concurrent use. Time enters as an argument (the clock stays outside).
type LogLimiter struct {
	period time.Duration
	burst  int

	mu          sync.Mutex
	windowStart time.Time // guarded by mu
	inWindow    int       // lines passed in the current window; guarded by mu
	pending     uint64    // suppressed since the last line that passed; guarded by mu

	suppressed atomic.Uint64 // every line ever suppressed
}

// Default log budget of the replicator's membership lines.
const (
	DefaultLogBurst  = 20
	DefaultLogPeriod = 10 * time.Second
)

// NewLogLimiter returns a limiter passing burst lines per period (defaults for values <= 0).
func NewLogLimiter(burst int, period time.Duration) *LogLimiter {
	return &LogLimiter{burst: orDefault(burst, DefaultLogBurst), period: orDefault(period, DefaultLogPeriod)}
}

// Allow reports whether a line may be written at now and, if so, how many lines were
// suppressed since the previous one that passed.
func (l *LogLimiter) Allow(now time.Time) (ok bool, suppressedBefore uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.windowStart) >= l.period || now.Before(l.windowStart) {
		l.windowStart, l.inWindow = now, 0
	}
	if l.inWindow >= l.burst {
		l.pending++
		l.suppressed.Add(1)
		return false, 0
	}
	l.inWindow++
	s := l.pending
	l.pending = 0
	return true, s
}

// Log writes one line at level through log unless the budget is spent.
func (l *LogLimiter) Log(log *slog.Logger, level slog.Level, msg string, args ...any) {
	if !log.Enabled(context.Background(), level) {
		return
	}
	ok, sup := l.Allow(time.Now())
	if !ok {
		return
	}
	if sup > 0 {
		args = append(args, "suppressed_since_last", sup)
	}
	log.Log(context.Background(), level, msg, args...)
}

// Suppressed returns how many lines were suppressed in total.
func (l *LogLimiter) Suppressed() uint64 { return l.suppressed.Load() }
