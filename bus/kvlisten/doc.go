// Package kvlisten receives KV-cache event batches from one inference-engine
// publisher (one worker, one global data-parallel rank) over ZeroMQ and hands
// them, in sequence order and exactly once where the engine allows it, to a
// Handler.
//
// The package moves bytes only: it never decodes a batch payload (package
// bus/kvevents does) and it never imports core/. A Listener owns
//
//   - one go-zeromq SUB socket dialled to the engine's PUB endpoint (vLLM,
//     SGLang and the Dynamo mocker all bind their PUB, so we dial);
//   - a sequence watermark W: the highest batch sequence number applied;
//   - on demand, a short-lived DEALER socket dialled to the engine's ROUTER
//     replay endpoint, used to repair gaps.
//
// # Wire format
//
// A live message has exactly three frames: [topic, seq, payload], where seq is
// an 8-byte big-endian unsigned integer. Any other shape (frame count, seq
// length, ZMTP command messages) is counted in State.Malformed and dropped.
//
// A replay request is the two frames [empty, start_seq as 8-byte BE] sent on a
// DEALER (a REQ socket would only ever see the first reply). The engine
// answers with one message per buffered batch whose seq >= start_seq, in
// order, either [empty, topic, seq, payload] (current vLLM) or
// [empty, seq, payload] (SGLang, older vLLM), and finishes with an end marker
// whose payload is empty (its seq is -1, all 0xff bytes).
//
// # Sequence rules
//
// For each live batch with sequence number S (W unset at start):
//
//   - W unset, S == 0: apply S.
//   - W unset, S > 0: replay [0, S), then apply S.
//   - S == W+1: apply S.
//   - S > W+1: a gap; replay [W+1, S), then apply S.
//   - S <= W: stale and skipped, unless the restart rule below says the
//     publisher restarted.
//
// Applying a batch calls Handler.Apply. When Apply returns an error the batch
// is "undecodable": it is counted and the watermark does not advance, so the
// next batch is seen as a gap and the undecodable batch is requested once more
// through replay (a second failure skips it for good).
//
// Replay applies only the batches inside the gap, in order, with
// replayed=true. It stops reading as soon as the gap is filled, so a large
// replay buffer is never read in full. Holes inside the replay (the engine's
// buffer no longer holds them), an early end marker and an inactivity timeout
// (Config.ReplayTimeout) make the replay incomplete: the missing batches are
// counted in State.Lost and logged, never fatal. Without a replay endpoint a
// gap is logged as "batches lost" and counted in State.Lost.
//
// # Publisher restart rule
//
// vLLM and SGLang number batches from 0 in every process, and one publisher
// instance sends strictly increasing sequence numbers on one PUB socket, with
// ZeroMQ preserving order per connection and never redelivering. A live
// stream from a single publisher incarnation therefore never shows S <= W.
// kvlisten declares a publisher restart when, for a live batch S:
//
//  1. (reconnect) S <= W and S is the first batch received on a SUB
//     connection made after a previous one broke. The old connection could
//     only break because the peer went away, and a surviving publisher would
//     have continued above W. Any S <= W counts, however far from 0.
//  2. (near zero) S <= W on an established connection, S < RestartWindow
//     (default 1024) and S is nearer to 0 than to W (S < W-S). This covers a
//     restart that did not visibly break our TCP connection (for example a
//     proxy in the path). Every other S <= W is counted as stale.
//  3. (incarnation probe) with a replay endpoint, every replay request starts
//     at W rather than W+1 when W is set, and the payload the engine returns
//     for seq W is compared (64-bit hash) with the payload that was applied
//     as W. A mismatch proves a new incarnation whose counter has already
//     passed W. After a reconnect the first batch triggers such a probe even
//     when it is contiguous (S == W+1), so a restarted engine that happens to
//     continue "in sequence" is still caught. If the engine no longer holds
//     seq W the probe is inconclusive and the stream is trusted.
//
// On a detected restart the listener calls Handler.Restarted(prevW, S) before
// applying anything from the new incarnation (the caller drops this rank's
// stale ownership), unsets W, then proceeds as for an unset watermark: replay
// [0, S) when S > 0 and a replay endpoint exists, then apply S.
//
// Limitation: without a replay endpoint, a restarted publisher whose first
// batch we see is above W (S > W) cannot be told apart from a gap.
//
// # Gate
//
// Config.Gate lets the owner hold back application (Dynamo's "pending until
// startup recovery is submitted"). While the gate channel is open the SUB is
// already connected and batches are received into a bounded buffer
// (Config.BufferBatches / Config.BufferBytes); when the buffer is full the
// newest batches are dropped (State.Overflowed) so that the oldest, which the
// engine's replay buffer is most likely to have forgotten, are kept; the
// dropped ones show up as a gap later and are replayed. Closing the gate
// applies the buffer in order and then follows the live stream.
//
// # Connections
//
// The listener does not use go-zeromq's automatic reconnect (it races with
// Close and still surfaces io.EOF). On any receive error the SUB socket is
// closed and a new one is dialled, with unlimited attempts and exponential
// backoff between Config.MinBackoff and Config.MaxBackoff. Each dial (TCP
// connect plus ZMTP handshake) is bounded by Config.DialTimeout. Dials go
// through a private transport registered with go-zeromq under the schemes
// "kvlisten-tcp" and "kvlisten-ipc": it ties the raw connection to the
// socket's lifetime so that closing a socket also aborts a handshake blocked
// on a silent peer, which go-zeromq alone cannot do.
//
// # Concurrency and ownership
//
// Each Listener runs two goroutines: a receiver that owns the SUB socket and
// a processor that owns the watermark, the gate buffer and every replay
// DEALER. The receiver hands batches over through a queue bounded in count
// (Config.QueueLen) and payload bytes (Config.QueueBytes, budget.go); when
// either is reached it stops reading, and back-pressure reaches the engine's
// PUB high-water mark, whose drops show up as sequence gaps that replay
// repairs. Handler methods are called only from the processor goroutine, one
// call at a time, in sequence order. Payload slices are freshly allocated per
// message by go-zeromq and never reused by this package, so a Handler may
// retain them. State may be called from any goroutine. Close stops both
// goroutines, closes every socket and waits; it is prompt even while a
// receive, dial or replay is blocked, because every blocking zmq4 call is
// bound to a context that Close cancels.
package kvlisten
