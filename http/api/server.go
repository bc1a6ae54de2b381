package api

import (
	"log/slog"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/kvselect/kvselect/core"
)

// Options configures the HTTP handler.
type Options struct {
	// Logger receives request errors and panics (default: discard).
	Logger *slog.Logger
	// AIBrix, when non-nil, serves the AIBrix external-routing decision endpoint at
	// AIBrixPath (default /v1alpha1/select).
	AIBrix     http.Handler
	AIBrixPath string
	// Metrics, when non-nil, is served at GET /metrics.
	Metrics http.Handler
}

// handlers binds the routes to a service.
type handlers struct {
	svc *core.Service
	log *slog.Logger
}

// New returns the HTTP handler for svc. Building the route table panics on a conflicting route,
// so it is exercised by the package tests.
func New(svc *core.Service, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handlers{svc: svc, log: opts.Logger}
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "route not found"})
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "method not allowed"})
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		if v == http.ErrAbortHandler {
			panic(v)
		}
		h.log.Error("handler panic", "method", req.Method, "path", req.URL.Path, "panic", v)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "internal server error"})
	}

	r.POST("/workers", h.upsertWorker)
	r.GET("/workers", h.listWorkers)
	r.PATCH("/workers/:worker_id", h.patchWorker)
	r.DELETE("/workers/:worker_id", h.deleteWorker)
	r.GET("/health", h.health)
	r.GET("/ready", h.ready)
	r.POST("/select", h.selectWorker)
	r.POST("/select_and_reserve", h.selectAndReserve)
	r.POST("/reservations", h.reserve)
	r.POST("/reservations/:id/prefill_complete", h.prefillComplete)
	r.POST("/reservations/:id/output_block", h.outputBlock)
	r.DELETE("/reservations/:id", h.free)
	r.GET("/loads", h.loads)
	r.POST("/potential_loads", h.potentialLoads)
	r.POST("/overlap_scores", h.overlapScores)
	r.GET("/dump", h.dump)
	r.POST("/replica_sync/register_peer", h.registerPeer)
	r.POST("/replica_sync/deregister_peer", h.deregisterPeer)
	r.GET("/replica_sync/peers", h.peers)
	r.GET("/replica_sync/members", h.members)
	if opts.Metrics != nil {
		r.Handler(http.MethodGet, "/metrics", opts.Metrics)
	}
	if opts.AIBrix != nil {
		path := opts.AIBrixPath
		if path == "" {
			path = "/v1alpha1/select"
		}
		r.Handler(http.MethodPost, path, opts.AIBrix)
	}
	return r
}
