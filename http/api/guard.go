package api

import (
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits bounds what HTTP clients can hold on the server: time (header, body and idle
// deadlines), connections and request-body memory. DefaultLimits documents every default; a
// zero field disables that limit.
type Limits struct {
	// ReadHeaderTimeout cuts a client that has not sent its request headers in time.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading one whole request, body included, so a slow body is cut: the
	// handler's read fails (408) and the connection is closed.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response (0: none; GET /dump streams a large index).
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle for longer.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds request headers (net/http answers 431 beyond it).
	MaxHeaderBytes int
	// MaxConns caps concurrently open client connections; connections beyond it are answered
	// at once with 503 and closed (see Guard.Listener).
	MaxConns int
	// MaxBodyBytesInFlight caps the memory held by request bodies being read, over all
	// requests: a body that would exceed it is refused with 503 (Retry-After) and its
	// connection closed. With the 8 MiB body limit, one request needs at most ~10 MiB.
	MaxBodyBytesInFlight int64
}

// DefaultLimits returns the limits kvselect serves with (each a --http-* flag).
func DefaultLimits() Limits {
	return Limits{
		ReadHeaderTimeout:    10 * time.Second,
		ReadTimeout:          30 * time.Second,
		IdleTimeout:          120 * time.Second,
		MaxHeaderBytes:       64 << 10,
		MaxConns:             4096,
		MaxBodyBytesInFlight: 256 << 20,
	}
}

// Guard applies Limits to one HTTP server and counts what it refused. Build it with NewGuard,
// serve through Server and Listener, and register it with Metrics.MustRegister for its
// metrics. It is safe for concurrent use.
type Guard struct {
	lim Limits
	log *slog.Logger

	conns         atomic.Int64  // open client connections (Listener)
	connsRejected atomic.Uint64 // connections answered 503 because MaxConns was reached
	rejecting     atomic.Int64  // goroutines writing a 503 to a rejected connection
	bodyBytes     atomic.Int64  // request-body buffer bytes reserved now
	bodyRejected  atomic.Uint64 // requests refused because MaxBodyBytesInFlight was reached
	bodyTimeouts  atomic.Uint64 // request bodies cut by ReadTimeout
	bodyPeak      atomic.Int64  // highest bodyBytes seen

	released     atomic.Int64 // body bytes released since the last return of memory to the OS
	freeSched    atomic.Bool  // a return of memory to the OS is scheduled
	lastFree     atomic.Int64 // unix nanos of the last return
	memReturns   atomic.Uint64
	freeInterval time.Duration
}

// freeThreshold is how many released body bytes trigger returning memory to the OS.
const freeThreshold = 16 << 20

// noteReleased returns freed request-body memory to the OS once at least freeThreshold bytes
// were released, at most once per freeInterval (default 5 s). Without it an idle process
// keeps the pages of a burst of large (or stalled and cut) bodies resident: nothing allocates,
// so no GC runs until the 2-minute forced one, and the scavenger only returns what a GC freed.
// debug.FreeOSMemory forces that GC and the return; the rate limit bounds its cost under load.
func (g *Guard) noteReleased(n int64) {
	if g.released.Add(n) < freeThreshold || !g.freeSched.CompareAndSwap(false, true) {
		return
	}
	iv := g.freeInterval
	if iv == 0 {
		iv = 5 * time.Second
	}
	wait := time.Duration(g.lastFree.Load()+int64(iv)) - time.Duration(time.Now().UnixNano())
	go func() {
		if wait > 0 {
			time.Sleep(wait) // rate limit, not synchronisation
		}
		g.released.Store(0)
		debug.FreeOSMemory()
		g.lastFree.Store(time.Now().UnixNano())
		g.memReturns.Add(1)
		g.freeSched.Store(false)
	}()
}

// NewGuard returns a guard for l; log receives refusals at debug level (nil: discard).
func NewGuard(l Limits, log *slog.Logger) *Guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Guard{lim: l, log: log}
}

// Limits returns the guard's configuration.
func (g *Guard) Limits() Limits { return g.lim }

// Server returns an http.Server for h on addr with the guard's deadlines, whose handler
// accounts request-body memory against MaxBodyBytesInFlight.
func (g *Guard) Server(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           g.Handler(h),
		ReadHeaderTimeout: g.lim.ReadHeaderTimeout,
		ReadTimeout:       g.lim.ReadTimeout,
		WriteTimeout:      g.lim.WriteTimeout,
		IdleTimeout:       g.lim.IdleTimeout,
		MaxHeaderBytes:    g.lim.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
}

// Handler wraps h so that readBody reserves the buffer memory it grows against the guard's
// body budget; the reservation is released when h returns (the buffer is garbage by then, or
// back in the small-buffer pool). Requests without a body pass through untouched.
func (g *Guard) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		bb := budgetPool.Get().(*budgetBody)
		bb.ReadCloser, bb.g, bb.held, bb.timedOut = r.Body, g, 0, false
		r.Body = bb
		defer func() {
			g.bodyBytes.Add(-bb.held)
			if bb.held > maxPooledBody {
				g.noteReleased(bb.held) // small bodies live in the pools, not worth returning
			}
			if bb.timedOut {
				g.bodyTimeouts.Add(1)
			}
			bb.ReadCloser, bb.g = nil, nil
			budgetPool.Put(bb)
		}()
		h.ServeHTTP(w, r)
	})
}

// budgetBody is a request body whose reader (readBody) reserves buffer growth from the guard
// and reports a read cut by the deadline. It is owned by one request's handler.
type budgetBody struct {
	io.ReadCloser
	g        *Guard
	held     int64
	timedOut bool
}

var budgetPool = sync.Pool{New: func() any { return new(budgetBody) }}

// reserve takes n more bytes from the budget; false (and nothing taken) when it would exceed
// MaxBodyBytesInFlight. Without a budget it only tracks the bytes.
func (b *budgetBody) reserve(n int64) bool {
	g := b.g
	v := g.bodyBytes.Add(n)
	if max := g.lim.MaxBodyBytesInFlight; max > 0 && v > max {
		g.bodyBytes.Add(-n)
		g.bodyRejected.Add(1)
		return false
	}
	for p := g.bodyPeak.Load(); v > p && !g.bodyPeak.CompareAndSwap(p, v); p = g.bodyPeak.Load() {
	}
	b.held += n
	return true
}

var (
	descConns         = prometheus.NewDesc("kvselect_http_connections", "Open HTTP client connections.", nil, nil)
	descConnsMax      = prometheus.NewDesc("kvselect_http_connections_limit", "Cap on open HTTP client connections (0 = none).", nil, nil)
	descConnsRejected = prometheus.NewDesc("kvselect_http_connections_rejected_total", "HTTP connections answered 503 because the connection cap was reached.", nil, nil)
	descBodyBytes     = prometheus.NewDesc("kvselect_http_body_bytes_in_flight", "Request-body buffer bytes held by requests being read.", nil, nil)
	descBodyPeak      = prometheus.NewDesc("kvselect_http_body_bytes_in_flight_peak", "Highest request-body bytes held at once since start.", nil, nil)
	descBodyMax       = prometheus.NewDesc("kvselect_http_body_bytes_in_flight_limit", "Cap on request-body bytes held at once (0 = none).", nil, nil)
	descBodyRejected  = prometheus.NewDesc("kvselect_http_body_budget_rejected_total", "Requests refused with 503 because the request-body memory budget was full.", nil, nil)
	descBodyTimeouts  = prometheus.NewDesc("kvselect_http_body_timeouts_total", "Request bodies cut by the read deadline (408).", nil, nil)
)

// Describe implements prometheus.Collector.
func (g *Guard) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConns, descConnsMax, descConnsRejected, descBodyBytes, descBodyPeak, descBodyMax, descBodyRejected, descBodyTimeouts} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (g *Guard) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(descConns, float64(g.conns.Load()))
	gauge(descConnsMax, float64(g.lim.MaxConns))
	counter(descConnsRejected, float64(g.connsRejected.Load()))
	gauge(descBodyBytes, float64(g.bodyBytes.Load()))
	gauge(descBodyPeak, float64(g.bodyPeak.Load()))
	gauge(descBodyMax, float64(g.lim.MaxBodyBytesInFlight))
	counter(descBodyRejected, float64(g.bodyRejected.Load()))
	counter(descBodyTimeouts, float64(g.bodyTimeouts.Load()))
}

// GuardStats is a snapshot of a guard's counters (for tests and logs).
type GuardStats struct {
	Conns, ConnsRejected, BodyBytes, BodyPeak, BodyRejected, BodyTimeouts int64
}

// Stats returns the guard's counters now.
func (g *Guard) Stats() GuardStats {
	return GuardStats{
		Conns: g.conns.Load(), ConnsRejected: int64(g.connsRejected.Load()),
		BodyBytes: g.bodyBytes.Load(), BodyPeak: g.bodyPeak.Load(),
		BodyRejected: int64(g.bodyRejected.Load()), BodyTimeouts: int64(g.bodyTimeouts.Load()),
	}
}

// MustRegister adds collectors (such as a Guard) to the metrics registry served at /metrics.
func (m *Metrics) MustRegister(cs ...prometheus.Collector) { m.reg.MustRegister(cs...) }
