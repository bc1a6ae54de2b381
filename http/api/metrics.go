package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
)

// Metrics holds the HTTP request metrics and serves GET /metrics from a registry that also
// carries the service's sizes and counters (read at scrape time) and the Go runtime's.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	ops      *opsCollector          // metrics_ops.go
	aibrix   *prometheus.CounterVec // AIBrix decisions by outcome (metrics_ops.go)
}

// NewMetrics builds the registry for svc.
func NewMetrics(svc *core.Service) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kvselect_http_requests_total", Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kvselect_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1},
		}, []string{"route"}),
	}
	m.registerOps(svc)
	m.reg.MustRegister(m.requests, m.latency, serviceCollector{svc}, busGuardCollector{svc}, limitsCollector{svc},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// statusRecorder captures the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// instrument wraps a route's handler with request counting and latency observation.
func (m *Metrics) instrument(route string, h httprouter.Handle) httprouter.Handle {
	if m == nil {
		return h
	}
	lat := m.latency.WithLabelValues(route)
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h(rec, r, ps)
		lat.Observe(time.Since(start).Seconds())
		m.requests.WithLabelValues(route, codeLabel(rec.code)).Inc()
	}
}

// codeLabels holds the decimal text of every valid status code, so labelling a request does
// not format (and allocate) it each time.
var codeLabels = func() (l [600]string) {
	for c := 100; c < len(l); c++ {
		l[c] = strconv.Itoa(c)
	}
	return l
}()

// codeLabel returns the label text of a status code.
func codeLabel(code int) string {
	if code >= 100 && code < len(codeLabels) {
		return codeLabels[code]
	}
	return strconv.Itoa(code)
}

// serviceCollector exports core.Service statistics at scrape time.
type serviceCollector struct{ svc *core.Service }

var (
	descIndexEntries = prometheus.NewDesc("kvselect_index_entries", "Indexed (block, owner) pairs.", []string{"model_name", "routing_group"}, nil)
	descIndexNodes   = prometheus.NewDesc("kvselect_index_nodes", "Prefix index nodes.", []string{"model_name", "routing_group"}, nil)
	descIndexBytes   = prometheus.NewDesc("kvselect_index_bytes", "Approximate bytes held by the prefix index.", []string{"model_name", "routing_group"}, nil)
	descRanks        = prometheus.NewDesc("kvselect_schedulable_ranks", "Schedulable (worker, DP rank) candidates.", []string{"model_name", "routing_group"}, nil)
	descBookings     = prometheus.NewDesc("kvselect_bookings", "Live bookings (local and mirrored from peers).", []string{"model_name", "routing_group"}, nil)
	descSessions     = prometheus.NewDesc("kvselect_session_bindings", "Session-affinity bindings.", []string{"model_name", "routing_group"}, nil)
	descPending      = prometheus.NewDesc("kvselect_pending_selections", "Pending selections awaiting POST /reservations.", nil, nil)
	descKVBlocks     = prometheus.NewDesc("kvselect_kv_blocks_total", "KV-event block operations applied, by kind.", []string{"kind"}, nil)
	descKVBatches    = prometheus.NewDesc("kvselect_kv_batches_total", "KV-event batches applied.", nil, nil)
	descKVBad        = prometheus.NewDesc("kvselect_kv_undecodable_batches_total", "KV-event batches that failed to decode.", nil, nil)
	descListeners    = prometheus.NewDesc("kvselect_kv_listeners", "KV-event listeners by status.", []string{"status"}, nil)
	descRepl         = prometheus.NewDesc("kvselect_replication_events_total", "Replica-sync events by stream and outcome.", []string{"stream", "outcome"}, nil)
	descPeers        = prometheus.NewDesc("kvselect_replication_peers", "Configured replica-sync peers.", nil, nil)
	descMembers      = prometheus.NewDesc("kvselect_replication_members", "Live replicas seen on the bus.", nil, nil)
	descRecovery     = prometheus.NewDesc("kvselect_recovery_info", "Startup index recovery: 1 for the current state and source.", []string{"state", "source"}, nil)
	descRecBlocks    = prometheus.NewDesc("kvselect_recovery_blocks", "Blocks recovered at startup.", nil, nil)
	descRecBytes     = prometheus.NewDesc("kvselect_recovery_bytes", "Snapshot bytes read at startup.", nil, nil)
	descRecDuration  = prometheus.NewDesc("kvselect_recovery_duration_seconds", "Duration of startup recovery.", nil, nil)
	descQueued       = prometheus.NewDesc("kvselect_router_queue_pending_requests", "Selections waiting in the router queue.", nil, nil)
	descQueuedClass  = prometheus.NewDesc("kvselect_router_queue_class_pending_requests", "Selections waiting in the router queue, by policy class.", []string{"policy_class"}, nil)
	descQueueOut     = prometheus.NewDesc("kvselect_router_queue_requests_total", "Requests that left the router queue, by outcome.", []string{"outcome"}, nil)
	descQueueWait    = prometheus.NewDesc("kvselect_router_queue_wait_seconds_total", "Time dispatched requests spent in the router queue.", nil, nil)
	descPrefillSpeed = prometheus.NewDesc("kvselect_prefill_seconds_per_1k_tokens", "Learned prefill time in seconds per 1,000 uncached tokens (linear term) of each rank: a histogram over the partition's ranks.", []string{"model_name", "routing_group"}, nil)
	descSpeedSamples = prometheus.NewDesc("kvselect_prefill_speed_samples_total", "Prefill completions the ranks' speed estimators learned from.", []string{"model_name", "routing_group"}, nil)
	descCtxShare     = prometheus.NewDesc("kvselect_prefill_context_share", "Learned share of the attention to cached context in prefill time, in units of the prior's cost per attention pair (0: cached context priced free).", []string{"model_name", "routing_group"}, nil)
	descReorder      = prometheus.NewDesc("kvselect_prefill_overtaken_share", "Learned share of prefill completions that a younger request on the same rank reached first token before (the engines' queue discipline: near 0 in arrival order; misses are priced for a reordering engine from 0.1).", []string{"model_name", "routing_group"}, nil)
	descReordered    = prometheus.NewDesc("kvselect_prefill_reordered", "1 when the partition's engines are learned to reorder their waiting queues (kvselect's miss price follows), else 0.", []string{"model_name", "routing_group"}, nil)
)

// prefillSpeedBuckets are the upper bounds (seconds per 1,000 uncached tokens, in base units as
// Prometheus asks) of kvselect_prefill_seconds_per_1k_tokens: from a fast GPU on a small model
// to a slow or shared one.
var prefillSpeedBuckets = []float64{0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}

// collectPrefillSpeeds exports one partition's learned speeds as a histogram over its ranks (per
// worker labels would not be low-cardinality) and their total sample count.
func collectPrefillSpeeds(ch chan<- prometheus.Metric, p engine.PartitionStats) {
	counts := make(map[float64]uint64, len(prefillSpeedBuckets))
	var sum float64
	var samples uint64
	for _, sp := range p.PrefillSpeeds {
		v := sp.MSPerToken // ms per token = seconds per 1,000 tokens
		sum += v
		samples += sp.Samples
		for _, b := range prefillSpeedBuckets {
			if v <= b {
				counts[b]++
			}
		}
	}
	m, g := p.Key.Model, p.Key.Group
	ch <- prometheus.MustNewConstHistogram(descPrefillSpeed, uint64(len(p.PrefillSpeeds)), sum, counts, m, g)
	ch <- prometheus.MustNewConstMetric(descSpeedSamples, prometheus.CounterValue, float64(samples), m, g)
	ch <- prometheus.MustNewConstMetric(descCtxShare, prometheus.GaugeValue, p.ContextShare, m, g)
	reordered := 0.0
	if p.QueueOrder.Reordered {
		reordered = 1
	}
	ch <- prometheus.MustNewConstMetric(descReorder, prometheus.GaugeValue, p.QueueOrder.OvertakenShare, m, g)
	ch <- prometheus.MustNewConstMetric(descReordered, prometheus.GaugeValue, reordered, m, g)
}

func (serviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descIndexEntries, descIndexNodes, descIndexBytes, descRanks, descBookings, descSessions,
		descPending, descKVBlocks, descKVBatches, descKVBad, descListeners, descRepl, descPeers, descMembers,
		descRecovery, descRecBlocks, descRecBytes, descRecDuration, descQueued, descQueuedClass, descQueueOut, descQueueWait,
		descPrefillSpeed, descSpeedSamples, descCtxShare, descReorder, descReordered} {
		ch <- d
	}
}

func (c serviceCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.svc.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, p := range st.Partitions {
		m, g := p.Key.Model, p.Key.Group
		gauge(descIndexEntries, float64(p.IndexEntries), m, g)
		gauge(descIndexNodes, float64(p.IndexNodes), m, g)
		gauge(descIndexBytes, float64(p.IndexBytes), m, g)
		gauge(descRanks, float64(p.Ranks), m, g)
		gauge(descBookings, float64(p.Bookings), m, g)
		gauge(descSessions, float64(p.Sessions), m, g)
		collectPrefillSpeeds(ch, p)
	}
	gauge(descPending, float64(st.PendingSelections))
	gauge(descQueued, float64(st.Queue.Pending))
	for class, n := range st.Queue.ByClass {
		gauge(descQueuedClass, float64(n), class)
	}
	counter(descQueueOut, float64(st.Queue.Dispatched), "dispatched")
	counter(descQueueOut, float64(st.Queue.Abandoned), "abandoned")
	counter(descQueueWait, st.Queue.WaitSecs)
	counter(descKVBlocks, float64(st.KV.StoredBlocks), "stored")
	counter(descKVBlocks, float64(st.KV.RemovedBlocks), "removed")
	counter(descKVBlocks, float64(st.KV.Cleared), "cleared")
	counter(descKVBlocks, float64(st.KV.Dropped), "dropped")
	counter(descKVBlocks, float64(st.KV.SizeMismatches), "block_size_mismatch")
	counter(descKVBlocks, float64(st.KV.UnknownRemoved), "unknown_removed")
	counter(descKVBatches, float64(st.KVBatches))
	counter(descKVBad, float64(st.KVUndecodable))
	for status, n := range st.ListenersByStatus {
		gauge(descListeners, float64(n), status)
	}
	if rs := c.svc.RecoveryStatus(); rs != nil {
		gauge(descRecovery, 1, rs.State, rs.Source)
		gauge(descRecBlocks, float64(rs.Blocks))
		gauge(descRecBytes, float64(rs.Bytes))
		gauge(descRecDuration, rs.DurationMS/1000)
	}
	if r := st.Replication; r != nil {
		for name, s := range map[string]struct{ pub, perr, odrop, recv, idrop, dec uint64 }{
			"lifecycle": {r.Lifecycle.Published, r.Lifecycle.PublishErrors, r.Lifecycle.OutboundDropped, r.Lifecycle.Received, r.Lifecycle.InboundDropped, r.Lifecycle.DecodeErrors},
			"affinity":  {r.Affinity.Published, r.Affinity.PublishErrors, r.Affinity.OutboundDropped, r.Affinity.Received, r.Affinity.InboundDropped, r.Affinity.DecodeErrors},
		} {
			counter(descRepl, float64(s.pub), name, "published")
			counter(descRepl, float64(s.perr), name, "publish_error")
			counter(descRepl, float64(s.odrop), name, "outbound_dropped")
			counter(descRepl, float64(s.recv), name, "received")
			counter(descRepl, float64(s.idrop), name, "inbound_dropped")
			counter(descRepl, float64(s.dec), name, "decode_error")
		}
		gauge(descPeers, float64(r.Peers))
		gauge(descMembers, float64(r.Members))
	}
}
