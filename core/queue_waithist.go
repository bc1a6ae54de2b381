package core

import "time"

// QueueWaitBuckets are the upper bounds (seconds) of the router-queue wait histogram. A parked
// request waits from a millisecond (the next free slot) to the caller's timeout (tens of
// seconds), so the buckets span 1 ms to 60 s, roughly ×2.5 apart.
var QueueWaitBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// waitHist is a cumulative histogram of router-queue waits (guarded by Service.mu).
type waitHist struct {
	counts [16]uint64 // counts[i]: waits ≤ QueueWaitBuckets[i] (not cumulative); last: above all
	n      uint64
	sum    float64
}

func (h *waitHist) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(QueueWaitBuckets) && s > QueueWaitBuckets[i] {
		i++
	}
	h.counts[i]++
	h.n++
	h.sum += s
}

// QueueWaitHistogram is a snapshot of the wait histogram: Cumulative[i] counts the dispatched
// requests that waited at most QueueWaitBuckets[i].
type QueueWaitHistogram struct {
	Count      uint64
	Sum        float64
	Cumulative []uint64
}

func (h *waitHist) snapshot() QueueWaitHistogram {
	out := QueueWaitHistogram{Count: h.n, Sum: h.sum, Cumulative: make([]uint64, len(QueueWaitBuckets))}
	var c uint64
	for i := range QueueWaitBuckets {
		c += h.counts[i]
		out.Cumulative[i] = c
	}
	return out
}

// QueueWaits returns the router-queue wait histogram of dispatched requests.
func (s *Service) QueueWaits() QueueWaitHistogram {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queueStats.hist.snapshot()
}
