// Package kvevents decodes the KV-cache event stream that vLLM and SGLang
// publish over ZeroMQ, at the wire level only.
//
// A live message is three frames [topic, seq (8-byte big-endian), payload]
// ([ParseLive]); a replay reply seen by a DEALER is
// [empty, topic, seq, payload] for newer vLLM or [empty, seq, payload] for
// SGLang and older vLLM, and an empty payload ends the replay
// ([ParseReplay]). The payload is a msgpack KVEventBatch which [Decoder]
// turns into a reusable [Batch]; [AppendBatch] encodes a Batch the way
// vLLM's msgspec encoder does (for mock workers and simulators).
//
// Accepted payload shapes (see shared/reference/kv-events-wire-format.md):
//
//   - batch as a positional array [ts, events] or [ts, events, dp_rank]
//     (further elements skipped), or as a map with keys ts, events,
//     data_parallel_rank / attn_dp_rank;
//   - events as tagged positional arrays of any length (legacy vLLM, SGLang,
//     Dynamo's mocker) or as maps with a "type" key (vLLM >= PR #42892);
//   - integers of every msgpack width, signed or unsigned; nil optionals;
//     Eagle bigram token lists; byte-string block hashes.
//
// Unknown event tags are skipped and counted in Batch.Unknown; they do not
// fail the batch. Any other malformation fails the whole batch with an error
// wrapping [ErrMalformed], so the caller does not advance its sequence
// watermark. Decoding never panics, whatever the input; nesting deeper than
// [MaxDepth] is rejected rather than recursed into.
//
// Ownership: a Batch's slices are reused by the next Decode into the same
// Batch, so callers copy what they keep. Strings in a Batch never alias the
// payload. A Decoder is not safe for concurrent use; give each listener its
// own.
//
// Typical use in a listener goroutine (one Decoder and one Batch per
// listener, reused for every message):
//
//	topic, seq, payload, err := kvevents.ParseLive(msg.Frames)
//	if err != nil { /* log, drop the message */ }
//	if err := dec.Decode(payload, &batch); err != nil {
//		/* log; do not advance the watermark; replay may fix it */
//	}
//	for i := range batch.Events {
//		ev := &batch.Events[i]
//		if !ev.Indexable() { continue } // hybrid-model side groups
//		/* translate ev (copying what is kept) */
//	}
//
// The package is transport-free and engine-free: no sockets, no goroutines,
// and it does not import core/. Translating events into index operations
// (public block hashes, tiers, partitions) is core's job.
package kvevents
