package kvlisten

// watermark is the sequence cursor of one publisher incarnation: the highest
// sequence number applied, if any. Owned by the processor goroutine.
type watermark struct {
	set bool
	w   uint64
}

// verdict says what to do with one live batch.
type verdict int

const (
	// vApply: the batch is next in sequence (or the first, seq 0).
	vApply verdict = iota
	// vGap: batches [from, S) are missing; repair them, then apply S.
	vGap
	// vStale: S <= W and not a restart; skip S.
	vStale
	// vRestart: a new publisher incarnation; notify, unset W, repair
	// [0, S) if S > 0, then apply S.
	vRestart
)

func (v verdict) String() string {
	switch v {
	case vApply:
		return "apply"
	case vGap:
		return "gap"
	case vStale:
		return "stale"
	case vRestart:
		return "restart"
	}
	return "unknown"
}

// decision is the pure outcome of classify.
type decision struct {
	verdict verdict
	from    uint64 // first missing seq for vGap
}

// classify applies the sequence rules and restart rules 1 and 2 of the
// package documentation to a live batch s. fresh reports that s is the first
// batch received on a connection that replaced a broken one. window is
// Config.RestartWindow. classify is pure and total: it never panics and is
// defined for every input, including s or W at the uint64 limits.
func classify(wm watermark, s uint64, fresh bool, window uint64) decision {
	if !wm.set {
		if s == 0 {
			return decision{verdict: vApply}
		}
		return decision{verdict: vGap, from: 0}
	}
	w := wm.w
	if s <= w {
		if fresh || nearZero(s, w, window) {
			return decision{verdict: vRestart}
		}
		return decision{verdict: vStale}
	}
	// s > w here, so w < MaxUint64 and w+1 cannot overflow.
	if s == w+1 {
		return decision{verdict: vApply}
	}
	return decision{verdict: vGap, from: w + 1}
}

// nearZero reports whether s (with s <= w) is close enough to 0 to be the
// counter of a freshly started publisher: below window and nearer to 0 than
// to w.
func nearZero(s, w, window uint64) bool {
	return s < window && s < w-s
}
