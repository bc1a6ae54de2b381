package kvlisten

import (
	"context"
	"testing"
)

// testContext returns a cancellable context that is also cancelled at the
// end of the test.
func testContext(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, cancel
}
