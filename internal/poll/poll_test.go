package poll

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestPollReturnsOnSuccess: the condition is polled until it holds, and no further.
func TestPollReturnsOnSuccess(t *testing.T) {
	calls := 0
	err := Poll(time.Minute, time.Microsecond, func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want nil after 3", err, calls)
	}
}

// TestPollTimesOutWithLastError: a condition that never holds yields its last error once the
// deadline passes, and is still called at least once with a zero timeout.
func TestPollTimesOutWithLastError(t *testing.T) {
	calls := 0
	err := Poll(0, time.Microsecond, func() error {
		calls++
		return fmt.Errorf("call %d", calls)
	})
	if err == nil || err.Error() != fmt.Sprintf("call %d", calls) || calls < 1 {
		t.Fatalf("err %v after %d calls, want the last call's error", err, calls)
	}
}

// TestPollStopsOnErrStop: an error wrapping ErrStop ends polling at once, long before the
// deadline.
func TestPollStopsOnErrStop(t *testing.T) {
	calls := 0
	err := Poll(time.Hour, time.Microsecond, func() error {
		calls++
		return fmt.Errorf("%w: worker exited", ErrStop)
	})
	if !errors.Is(err, ErrStop) || calls != 1 {
		t.Fatalf("err %v after %d calls, want ErrStop after 1", err, calls)
	}
}
