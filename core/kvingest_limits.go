package core

import (
	"fmt"

	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/kvwire"
)

// DefaultMaxKVListeners bounds the KV-event listeners (one ZMQ SUB socket, goroutine and
// buffers each) a service runs when Config.MaxKVListeners is not set.
const DefaultMaxKVListeners = 4096

// Listener bounds. Each listener is a socket, a goroutine and decode buffers; a catalog of
// 16k workers × 1024 ranks would otherwise open millions. Two bounds apply when a rank's
// listener would start (kvIngest.reconcile):
//   - one listener per endpoint and partition: a rank whose event endpoint already feeds
//     another (worker, rank) of the same partition gets no second SUB socket (its status is
//     failed, naming the owner), so one publisher's blocks are never indexed for two ranks of
//     one partition; workers of different partitions may share a publisher;
//   - at most Config.MaxKVListeners listeners in total (--max-kv-listeners).
//
// Both refusals show as a failed listener in GET /workers and kvselect_kv_listeners, and are
// retried when the rank's endpoints change. Endpoint syntax is validated before (the engine's
// and kvlisten's checks).

// listenerBook is kvIngest's count of started listeners by endpoint (guarded by kvIngest.mu).
type listenerBook struct {
	byEndpoint map[string]kvwire.Owner
	refused    uint64
}

// admitListener checks src against the listener bounds (kv.mu held).
func (kv *kvIngest) admitListener(src engine.EventSource) error {
	b := &kv.book
	if o, ok := b.byEndpoint[endpointKey(src)]; ok && o != src.Owner {
		b.refused++
		return fmt.Errorf("endpoint %s already feeds worker %d dp_rank %d of %s: one listener per endpoint and partition", src.Endpoint, o.Worker, o.Rank, src.Partition)
	}
	max := kv.svc.cfg.MaxKVListeners
	if max == 0 {
		max = DefaultMaxKVListeners
	}
	if max > 0 && len(b.byEndpoint) >= max {
		b.refused++
		return fmt.Errorf("%d KV-event listeners run: the limit is %d (--max-kv-listeners)", len(b.byEndpoint), max)
	}
	return nil
}

// noteStarted records a started listener (kv.mu held).
func (kv *kvIngest) noteStarted(rl *rankListener) {
	if rl.l == nil {
		return
	}
	if kv.book.byEndpoint == nil {
		kv.book.byEndpoint = make(map[string]kvwire.Owner)
	}
	kv.book.byEndpoint[endpointKey(rl.src)] = rl.src.Owner
}

// endpointKey scopes an endpoint to its partition.
func endpointKey(src engine.EventSource) string {
	return src.Partition.Model + "\x00" + src.Partition.Group + "\x00" + src.Endpoint
}

// noteClosed forgets a listener being closed (kv.mu held).
func (kv *kvIngest) noteClosed(rl *rankListener) {
	if k := endpointKey(rl.src); rl.l != nil && kv.book.byEndpoint[k] == rl.src.Owner {
		delete(kv.book.byEndpoint, k)
	}
}
