// Package poll waits for asynchronous conditions in tests the one way this project allows:
// by polling against a deadline, never by sleeping for a guessed duration. It imports nothing
// heavy, so any test binary may use it (bus/natstest builds its NATS waits on it).
package poll

import (
	"errors"
	"testing"
	"time"
)

// DefaultInterval is the interval of Until and True: short enough that loopback conditions are
// seen promptly, long enough not to spin a shared CPU.
const DefaultInterval = 5 * time.Millisecond

// ErrStop, wrapped by a condition's error, ends polling at once (say, the process whose state
// is awaited has exited and never will satisfy it).
var ErrStop = errors.New("poll: stop")

// Poll calls cond every interval until it returns nil, returning nil; or until timeout has
// passed or cond's error wraps ErrStop, returning cond's last error. cond runs at least once.
func Poll(timeout, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrStop) || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(interval) // polling interval, not synchronisation
	}
}

// Until polls cond every DefaultInterval and fails the test with cond's last error if it does
// not return nil within timeout.
func Until(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(timeout, DefaultInterval, cond); err != nil {
		t.Fatalf("condition not met within %v: %v", timeout, err)
	}
}

// errFalse is the error True's condition reports while it does not hold.
var errFalse = errors.New("not yet")

// True polls cond every DefaultInterval and fails the test, naming what it waited for, if cond
// does not hold within timeout.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := Poll(timeout, DefaultInterval, func() error {
		if cond() {
			return nil
		}
		return errFalse
	})
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}
