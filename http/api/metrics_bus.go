package api

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvselect/kvselect/core"
)

// busGuardCollector exports the bus's defence counters (core.BusGuardStats): impersonation
// and legacy drops by stream, table bounds, and dead-peer releases. Low cardinality: the only
// label is the stream name.
type busGuardCollector struct{ svc *core.Service }

var (
	descBusDropped = prometheus.NewDesc("kvselect_bus_messages_dropped_total",
		"Bus messages dropped for their origin or form, by stream and reason (impersonation: sender is not the subject's; v1_refused: --bus-v1 off; unauthenticated: v1 for a replica heard on v2; decode_error).",
		[]string{"stream", "reason"}, nil)
	descBusMembersRejected = prometheus.NewDesc("kvselect_bus_members_rejected_total", "Heartbeats of new replica ids dropped because the members table was full (--bus-max-members).", nil, nil)
	descBusLogsSuppressed  = prometheus.NewDesc("kvselect_bus_log_lines_suppressed_total", "Membership log lines dropped by the log rate limit.", nil, nil)
	descBusDeadPeers       = prometheus.NewDesc("kvselect_bus_dead_peers_total", "Peers whose mirrored bookings were released (expired: no heartbeat for --peer-dead-after, or left).", nil, nil)
	descBusDeadBookings    = prometheus.NewDesc("kvselect_bus_dead_peer_bookings_released_total", "Mirrored bookings released with dead peers.", nil, nil)
	descBusReadmits        = prometheus.NewDesc("kvselect_bus_peer_readmissions_total", "Released peers that came back and were asked to republish.", nil, nil)
	descBusPendingSets     = prometheus.NewDesc("kvselect_bus_pending_live_sets", "Partial peer live sets being reassembled.", nil, nil)
	descBusPendingBytes    = prometheus.NewDesc("kvselect_bus_pending_live_set_bytes", "Estimated memory of partial peer live sets.", nil, nil)
	descBusPendingEvicted  = prometheus.NewDesc("kvselect_bus_pending_live_sets_evicted_total", "Partial live sets evicted (oldest first) to stay within the count and byte bounds.", nil, nil)
	descBusChunksRejected  = prometheus.NewDesc("kvselect_bus_live_set_chunks_rejected_total", "Live-set chunks refused as oversized.", nil, nil)
)

func (busGuardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBusDropped, descBusMembersRejected, descBusLogsSuppressed, descBusDeadPeers,
		descBusDeadBookings, descBusReadmits, descBusPendingSets, descBusPendingBytes, descBusPendingEvicted, descBusChunksRejected} {
		ch <- d
	}
}

func (c busGuardCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := c.svc.BusGuardStats()
	if !ok {
		return
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	for _, stream := range []string{"lifecycle", "affinity", "members"} {
		counter(descBusDropped, st.Impersonations[stream], stream, "impersonation")
		counter(descBusDropped, st.V1Refused[stream], stream, "v1_refused")
		counter(descBusDropped, st.Unauthenticated[stream], stream, "unauthenticated")
		counter(descBusDropped, st.DecodeErrors[stream], stream, "decode_error")
	}
	counter(descBusMembersRejected, st.MembersRejected)
	counter(descBusLogsSuppressed, st.LogsSuppressed)
	counter(descBusDeadPeers, st.Dead.Released)
	counter(descBusDeadBookings, st.Dead.Bookings)
	counter(descBusReadmits, st.Dead.Readmits)
	gauge(descBusPendingSets, float64(st.Pending.Sets))
	gauge(descBusPendingBytes, float64(st.Pending.Bytes))
	counter(descBusPendingEvicted, st.Pending.Evicted)
	counter(descBusChunksRejected, st.Pending.Rejected)
}
