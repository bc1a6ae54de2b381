package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvselect/kvselect/core"
)

// limitsCollector exports the bounded tables (core.Service.LimitStats) at scrape time:
//
//	kvselect_limit_size{table}          what a bounded table holds now
//	kvselect_limit_max{table}           its configured bound (-1: unlimited)
//	kvselect_limit_events_total{limit}  refusals and evictions, by the limit that acted
type limitsCollector struct{ svc *core.Service }

var (
	descLimitSize   = prometheus.NewDesc("kvselect_limit_size", "Entries held by a bounded table.", []string{"table"}, nil)
	descLimitMax    = prometheus.NewDesc("kvselect_limit_max", "Configured bound of a table (-1 = unlimited).", []string{"table"}, nil)
	descLimitEvents = prometheus.NewDesc("kvselect_limit_events_total", "Requests refused, entries evicted or pruned, by the limit that acted.", []string{"limit"}, nil)
)

func (limitsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLimitSize
	ch <- descLimitMax
	ch <- descLimitEvents
}

func (c limitsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.svc.LimitStats()
	l, n := st.Limits, st.Counters
	bound := func(v int64) float64 {
		if v >= int64(^uint(0)>>1) {
			return -1
		}
		return float64(v)
	}
	size := func(table string, v, max int64) {
		ch <- prometheus.MustNewConstMetric(descLimitSize, prometheus.GaugeValue, float64(v), table)
		ch <- prometheus.MustNewConstMetric(descLimitMax, prometheus.GaugeValue, bound(max), table)
	}
	size("bookings", int64(st.Bookings), int64(l.MaxBookings))
	size("booked_blocks", st.BookedBlocks, l.MaxBookedBlocks)
	size("workers", int64(st.Workers), int64(l.MaxWorkers))
	size("partitions", int64(st.Partitions), int64(l.MaxPartitions))
	size("approx_blocks_per_partition", int64(st.ApproxBlocks), int64(l.ApproxMaxBlocks))
	size("kv_listeners", int64(st.Listeners), -1)
	for name, v := range map[string]uint64{
		"request_size":          n.RejectedTooLarge + st.TooLargeBeforeLock,
		"bookings":              n.RejectedBookings,
		"bookings_per_worker":   n.RejectedWorkerBooking,
		"peer_bookings_dropped": n.DroppedPeerBookings,
		"workers":               n.RejectedWorkers,
		"partitions":            n.RejectedPartitions,
		"partitions_reclaimed":  n.ReclaimedPartitions,
		"index_rank_blocks":     n.IndexEvicted,
		"approx_blocks_pruned":  n.ApproxPruned,
		"approx_prune_passes":   n.ApproxPrunes,
		"kv_listeners_refused":  st.ListenersRefused,
	} {
		ch <- prometheus.MustNewConstMetric(descLimitEvents, prometheus.CounterValue, float64(v), name)
	}
}
