package sim

// kvEventIndex is a router-side index of which blocks each worker caches, built only from the
// workers' KV events (stored, removed) as a deployed router receives them. It is what an
// event-fed selector (llm-d's precise prefix-cache scorer, Dynamo's KV router) knows: whatever
// lag or loss the event stream has, the index has too.
//
// It implements EventSink; pass the owning policy (or the index) to Run. Owned by one policy.
type kvEventIndex struct {
	workers []map[uint64]struct{}
}

func (x *kvEventIndex) of(w int) map[uint64]struct{} {
	for len(x.workers) <= w {
		x.workers = append(x.workers, make(map[uint64]struct{}))
	}
	return x.workers[w]
}

// Stored implements EventSink.
func (x *kvEventIndex) Stored(w int, _ uint64, _ bool, blocks []uint64) {
	m := x.of(w)
	for _, b := range blocks {
		m[b] = struct{}{}
	}
}

// Removed implements EventSink.
func (x *kvEventIndex) Removed(w int, blocks []uint64) {
	m := x.of(w)
	for _, b := range blocks {
		delete(m, b)
	}
}

// Prefix returns how many leading blocks of blocks the index holds for worker w.
func (x *kvEventIndex) Prefix(w int, blocks []uint64) int {
	if w >= len(x.workers) {
		return 0
	}
	m := x.workers[w]
	for i, b := range blocks {
		if _, ok := m[b]; !ok {
			return i
		}
	}
	return len(blocks)
}

// SinkOf returns p as the EventSink Run should feed, or nil when p does not consume KV events.
func SinkOf(p Policy) EventSink {
	if s, ok := p.(EventSink); ok {
		return s
	}
	return nil
}
