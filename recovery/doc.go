// Package recovery restores the KV prefix index at startup, before the selector applies live
// KV events: from a peer's GET /dump over HTTP (a Dynamo standalone indexer or another kvselect,
// the --indexer-peers path) or from a live kvselect replica over NATS with a chunked
// request/reply snapshot protocol.
//
// # Pieces
//
//   - [ParseDump] streams Dynamo's /dump document (spec §11.2) into a [Sink], one partition at a
//     time, never holding more than one event in memory. It enforces [Limits] on bytes, events,
//     partitions and blocks per event.
//   - [FetchHTTP] tries each peer's <url>/dump in order; the first that parses completely wins.
//   - [SnapshotServer] answers snapshot chunk requests on a replica; [FetchNATS] pulls a snapshot
//     from the first live peer that answers and feeds it to ParseDump as it arrives.
//
// # Atomicity contract
//
// A Sink sees Begin, then Events, then exactly one of End or Abort for each partition. A
// partition that is malformed in a way the parser can step over (wrong types, an unknown tier, a
// key without ':', too many blocks in one event, a Sink error) is aborted alone and the rest of
// the document still counts. Anything that breaks the stream (a syntax error, truncation, a byte
// or event limit, a digest mismatch, a transport error) makes the whole fetch fail: the caller
// must then discard every partition it staged from that source. core stages every partition and
// installs only after the fetch returned nil, so a peer's dump is used whole or not at all.
//
// # Layering
//
// This package imports bus (transport only) and kvwire (tiers), never core: it speaks its own wire types
// ([RouterEvent], [Partition]) and core translates them into engine events.
//
// # Concurrency
//
// ParseDump, FetchHTTP and FetchNATS call the Sink from the calling goroutine only (FetchNATS
// parses on a helper goroutine but never calls the Sink concurrently). A SnapshotServer is safe
// for concurrent use; its Handle method is what bus.Replicator.ServeSnapshot installs.
package recovery
