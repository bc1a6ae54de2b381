package engine

import "errors"

// Limit sentinels (mapped to HTTP statuses in http/api/errors.go, like the others). Every
// bounded table and per-request limit refuses with one of them and a message that names the
// limit and its value.
var (
	// ErrTooLarge: one request exceeds a per-request limit (tokens, hashes) (HTTP 413).
	ErrTooLarge = errors.New("request too large")
	// ErrTooManyBookings: the booking table is full, in total or for the chosen worker; frees
	// make room, so the caller may retry (HTTP 429).
	ErrTooManyBookings = errors.New("too many bookings")
	// ErrTableFull: a catalog table (workers, partitions) is at its configured size; only
	// deleting entries makes room (HTTP 507 Insufficient Storage).
	ErrTableFull = errors.New("table full")
)

func tooLarge(format string, args ...any) *Error  { return errorf(ErrTooLarge, format, args...) }
func tableFull(format string, args ...any) *Error { return errorf(ErrTableFull, format, args...) }
func tooManyBookings(format string, args ...any) *Error {
	return errorf(ErrTooManyBookings, format, args...)
}

// Limits bounds the engine's tables and the cost of one request. A zero field takes its
// DefaultLimits value; a negative one disables that limit. Each is a kvselect flag (README
// "Limits").
type Limits struct {
	// MaxRequestTokens bounds token_ids (or mm_routing_info.routing_token_ids) per request
	// (default 2^20 = 1,048,576: above every served context window).
	MaxRequestTokens int
	// MaxRequestHashes bounds block_hashes and sequence_hashes per request, and the blocks a
	// token prompt hashes into (default 2^16 = 65,536: 1M tokens at block size 16).
	MaxRequestHashes int
	// MaxBookings bounds live bookings, local and mirrored from peers (default 2^17).
	MaxBookings int
	// MaxBookingsPerWorker bounds live bookings on one worker, all its ranks (default 2^14).
	MaxBookingsPerWorker int
	// MaxBookedBlocks bounds the tracking hashes held by all live bookings (default 2^24:
	// about 0.5 GiB of booking state).
	MaxBookedBlocks int64
	// MaxWorkers bounds catalog records (default 2^14).
	MaxWorkers int
	// MaxPartitions bounds (model_name, routing_group) partitions (default 2^10).
	MaxPartitions int
	// IndexHeadroom multiplies a rank's declared total_kv_blocks into its KV-index budget
	// (default 1.25); past it the rank's oldest-stored blocks are evicted.
	IndexHeadroom float64
	// MaxIndexBlocksPerRank is a rank's KV-index budget when its worker declared no
	// total_kv_blocks (default 2^20).
	MaxIndexBlocksPerRank int
	// ApproxMaxBlocks is the approximate index's budget per partition, in (block, rank)
	// entries (default 2^20, Dynamo's max_tree_size); past it the index is pruned to
	// ApproxPruneRatio of it (default 0.8), earliest expiry first, deepest block first on ties.
	ApproxMaxBlocks  int
	ApproxPruneRatio float64
}

// DefaultLimits returns the documented defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxRequestTokens:      1 << 20,
		MaxRequestHashes:      1 << 16,
		MaxBookings:           1 << 17,
		MaxBookingsPerWorker:  1 << 14,
		MaxBookedBlocks:       1 << 24,
		MaxWorkers:            1 << 14,
		MaxPartitions:         1 << 10,
		IndexHeadroom:         1.25,
		MaxIndexBlocksPerRank: 1 << 20,
		ApproxMaxBlocks:       1 << 20,
		ApproxPruneRatio:      0.8,
	}
}

// unlimited stands for a disabled limit after resolution.
const unlimited = int(^uint(0) >> 1)

// resolved fills zero fields with defaults and turns negative ones into "no limit".
func (l Limits) resolved() Limits {
	d := DefaultLimits()
	ints := []struct{ v, d *int }{
		{&l.MaxRequestTokens, &d.MaxRequestTokens}, {&l.MaxRequestHashes, &d.MaxRequestHashes},
		{&l.MaxBookings, &d.MaxBookings}, {&l.MaxBookingsPerWorker, &d.MaxBookingsPerWorker},
		{&l.MaxWorkers, &d.MaxWorkers}, {&l.MaxPartitions, &d.MaxPartitions},
		{&l.MaxIndexBlocksPerRank, &d.MaxIndexBlocksPerRank}, {&l.ApproxMaxBlocks, &d.ApproxMaxBlocks},
	}
	for _, f := range ints {
		switch {
		case *f.v == 0:
			*f.v = *f.d
		case *f.v < 0:
			*f.v = unlimited
		}
	}
	switch {
	case l.MaxBookedBlocks == 0:
		l.MaxBookedBlocks = d.MaxBookedBlocks
	case l.MaxBookedBlocks < 0:
		l.MaxBookedBlocks = int64(unlimited)
	}
	if l.IndexHeadroom == 0 {
		l.IndexHeadroom = d.IndexHeadroom
	}
	if !(l.ApproxPruneRatio > 0 && l.ApproxPruneRatio < 1) {
		l.ApproxPruneRatio = d.ApproxPruneRatio
	}
	return l
}

// Limits returns the engine's resolved limits.
func (e *Engine) Limits() Limits { return e.cfg.Limits.resolved() }

// CheckPromptSize refuses a prompt over the per-request token or hash limits (413, naming the
// limit). It reads only the prompt and l, so the service calls it before taking its lock; the
// engine checks again when it normalises.
func CheckPromptSize(l Limits, pr *Prompt) error {
	l = l.resolved()
	tokens := len(pr.TokenIDs)
	if mi := pr.MMRoutingInfo; mi != nil && len(mi.RoutingTokenIDs) > 0 {
		tokens = len(mi.RoutingTokenIDs)
	}
	if tokens > l.MaxRequestTokens {
		return tooLarge("token_ids has %d tokens; the limit is %d per request (--max-request-tokens)", tokens, l.MaxRequestTokens)
	}
	if n := max(len(pr.BlockHashes), len(pr.SequenceHashes)); n > l.MaxRequestHashes {
		return tooLarge("block_hashes/sequence_hashes have %d entries; the limit is %d per request (--max-request-hashes)", n, l.MaxRequestHashes)
	}
	return nil
}

// checkBlocks refuses a token prompt whose block count exceeds the hash limit.
func (l *Limits) checkBlocks(tokens int, bs uint32) error {
	if bs == 0 {
		return nil
	}
	if blocks := tokens / int(bs); blocks > l.MaxRequestHashes {
		return tooLarge("a prompt of %d tokens makes %d blocks at block size %d; the limit is %d per request (--max-request-hashes)", tokens, blocks, bs, l.MaxRequestHashes)
	}
	return nil
}
