package api

import (
	"bytes"
	"net/http"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvselect/kvselect/core"
)

// Operator metrics: routing quality per partition, router-queue wait histogram, workers-file
// source, NATS connection state, AIBrix decisions by outcome, rejected bearer tokens. Every label
// is low-cardinality (partition names, fixed outcome sets); none carries an id.

var (
	descQBookings  = prometheus.NewDesc("kvselect_routing_bookings_total", "Bookings measured for routing quality (select_and_reserve and replayed POST /reservations).", []string{"model_name", "routing_group"}, nil)
	descQAchieved  = prometheus.NewDesc("kvselect_routing_achieved_overlap_tokens_total", "Device-tier prefix tokens matched on the chosen rank, summed over bookings.", []string{"model_name", "routing_group"}, nil)
	descQAvailable = prometheus.NewDesc("kvselect_routing_available_overlap_tokens_total", "Best device-tier prefix match on any eligible rank, in tokens, summed over bookings.", []string{"model_name", "routing_group"}, nil)
	descQNotMax    = prometheus.NewDesc("kvselect_routing_not_max_overlap_total", "Bookings whose chosen rank matched fewer prefix tokens than the best eligible rank.", []string{"model_name", "routing_group"}, nil)
	descQSticky    = prometheus.NewDesc("kvselect_routing_sticky_total", "Bookings from which the kvselect policy's cache stickiness kept at least one eligible rank.", []string{"model_name", "routing_group"}, nil)
	descQueueHist  = prometheus.NewDesc("kvselect_router_queue_wait_seconds", "Time dispatched requests waited in the router queue.", nil, nil)
	descWFOwned    = prometheus.NewDesc("kvselect_workers_file_workers", "Workers owned by --workers-file.", nil, nil)
	descWFApplied  = prometheus.NewDesc("kvselect_workers_file_snapshots_total", "Workers-file snapshots by outcome (applied, apply_failed, parse_error).", []string{"outcome"}, nil)
	descNATSConn   = prometheus.NewDesc("kvselect_nats_connected", "1 while the NATS connection is connected.", nil, nil)
	descNATSRecon  = prometheus.NewDesc("kvselect_nats_reconnects_total", "NATS reconnections since start.", nil, nil)
	descAuthDenied = prometheus.NewDesc("kvselect_http_unauthorized_total", "Requests refused for a missing or wrong bearer token.", nil, nil)
)

// opsCollector exports the operator metrics at scrape time. nc and auth are set after
// construction (WatchNATS, WatchAuth) and may stay nil.
type opsCollector struct {
	svc  *core.Service
	nc   atomic.Pointer[nats.Conn]
	auth atomic.Pointer[Auth]
}

// registerOps adds the operator metrics to the registry (called by NewMetrics).
func (m *Metrics) registerOps(svc *core.Service) {
	m.ops = &opsCollector{svc: svc}
	m.aibrix = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvselect_aibrix_decisions_total",
		Help: "AIBrix external-routing answers by outcome: Selected, NoDecision, Denied, or problem (an RFC 9457 error answer).",
	}, []string{"outcome"})
	for _, o := range []string{"Selected", "NoDecision", "Denied", "problem"} {
		m.aibrix.WithLabelValues(o)
	}
	m.reg.MustRegister(m.ops, m.aibrix)
}

// WatchNATS exports nc's connection state and reconnect count.
func (m *Metrics) WatchNATS(nc *nats.Conn) { m.ops.nc.Store(nc) }

// WatchAuth exports a's refusal count.
func (m *Metrics) WatchAuth(a *Auth) { m.ops.auth.Store(a) }

func (c *opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQBookings, descQAchieved, descQAvailable, descQNotMax, descQSticky, descQueueHist,
		descWFOwned, descWFApplied, descNATSConn, descNATSRecon, descAuthDenied} {
		ch <- d
	}
}

func (c *opsCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	for _, p := range c.svc.Stats().Partitions {
		m, g, q := p.Key.Model, p.Key.Group, p.Quality
		counter(descQBookings, float64(q.Bookings), m, g)
		counter(descQAchieved, float64(q.AchievedTokens), m, g)
		counter(descQAvailable, float64(q.AvailableTokens), m, g)
		counter(descQNotMax, float64(q.NotMaxOverlap), m, g)
		counter(descQSticky, float64(q.StickyBookings), m, g)
	}
	w := c.svc.QueueWaits()
	buckets := make(map[float64]uint64, len(core.QueueWaitBuckets))
	for i, ub := range core.QueueWaitBuckets {
		buckets[ub] = w.Cumulative[i]
	}
	ch <- prometheus.MustNewConstHistogram(descQueueHist, w.Count, w.Sum, buckets)
	if st := c.svc.WorkersFileStatus(); st != nil {
		ch <- prometheus.MustNewConstMetric(descWFOwned, prometheus.GaugeValue, float64(st.OwnedWorkers))
		counter(descWFApplied, float64(st.SnapshotsApplied), "applied")
		counter(descWFApplied, float64(st.ApplyFailures), "apply_failed")
		counter(descWFApplied, float64(st.ParseErrors), "parse_error")
	}
	if nc := c.nc.Load(); nc != nil {
		v := 0.0
		if nc.IsConnected() {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descNATSConn, prometheus.GaugeValue, v)
		counter(descNATSRecon, float64(nc.Stats().Reconnects))
	}
	if a := c.auth.Load(); a != nil {
		counter(descAuthDenied, float64(a.Denied()))
	}
}

// InstrumentAIBrix counts the AIBrix endpoint's answers by outcome. The decision is read from
// the answer the handler wrote (its encoder's exact byte layout, `"decision":"X"`); any non-200
// answer is a problem document.
func (m *Metrics) InstrumentAIBrix(h http.Handler) http.Handler {
	if m == nil || h == nil {
		return h
	}
	sel, nod, den, prob := m.aibrix.WithLabelValues("Selected"), m.aibrix.WithLabelValues("NoDecision"),
		m.aibrix.WithLabelValues("Denied"), m.aibrix.WithLabelValues("problem")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &decisionRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r)
		switch {
		case rec.code != http.StatusOK:
			prob.Inc()
		case bytes.Contains(rec.head, []byte(`"decision":"Selected"`)):
			sel.Inc()
		case bytes.Contains(rec.head, []byte(`"decision":"NoDecision"`)):
			nod.Inc()
		case bytes.Contains(rec.head, []byte(`"decision":"Denied"`)):
			den.Inc()
		}
	})
}

// decisionRecorder keeps the status code and the first bytes of the body.
type decisionRecorder struct {
	http.ResponseWriter
	code int
	head []byte
}

const decisionScanBytes = 64 << 10 // the protocol's response cap

func (r *decisionRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *decisionRecorder) Write(b []byte) (int, error) {
	if room := decisionScanBytes - len(r.head); room > 0 {
		r.head = append(r.head, b[:min(room, len(b))]...)
	}
	return r.ResponseWriter.Write(b)
}
