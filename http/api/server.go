package api

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"

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
	// Metrics, when non-nil, instruments every route and is served at GET /metrics.
	Metrics *Metrics
	// Auth, when non-nil, requires bearer tokens on the Dynamo API (auth.go).
	Auth *Auth
	// ReplicaID is shown on the status page (GET /ui, GET /status).
	ReplicaID string
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
	r := newRouteRecorder()
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

	// get serves a GET route and HEAD on the same path, as axum does wherever it serves GET:
	// the same handler runs and net/http drops the body (keeping Content-Length when the body
	// was buffered whole). Allow headers on 405 therefore list HEAD beside GET.
	get := func(path string, handle httprouter.Handle) {
		handle = opts.Metrics.instrument(path, handle)
		r.GET(path, handle)
		r.HEAD(path, handle)
	}
	r.POST("/workers", opts.Metrics.instrument("/workers", h.upsertWorker))
	get("/workers", h.listWorkers)
	r.PATCH("/workers/:worker_id", opts.Metrics.instrument("/workers/:worker_id", h.patchWorker))
	r.DELETE("/workers/:worker_id", opts.Metrics.instrument("/workers/:worker_id", h.deleteWorker))
	get("/health", h.health)
	get("/ready", h.ready)
	r.POST("/select", opts.Metrics.instrument("/select", h.selectWorker))
	r.POST("/select_and_reserve", opts.Metrics.instrument("/select_and_reserve", h.selectAndReserve))
	r.POST("/reservations", opts.Metrics.instrument("/reservations", h.reserve))
	r.POST("/reservations/:id/prefill_complete", opts.Metrics.instrument("/reservations/:id/prefill_complete", h.prefillComplete))
	r.POST("/reservations/:id/output_block", opts.Metrics.instrument("/reservations/:id/output_block", h.outputBlock))
	r.DELETE("/reservations/:id", opts.Metrics.instrument("/reservations/:id", h.free))
	get("/loads", h.loads)
	r.POST("/potential_loads", opts.Metrics.instrument("/potential_loads", h.potentialLoads))
	r.POST("/overlap_scores", opts.Metrics.instrument("/overlap_scores", h.overlapScores))
	get("/dump", h.dump)
	r.POST("/replica_sync/register_peer", opts.Metrics.instrument("/replica_sync/register_peer", h.registerPeer))
	r.POST("/replica_sync/deregister_peer", opts.Metrics.instrument("/replica_sync/deregister_peer", h.deregisterPeer))
	get("/replica_sync/peers", h.peers)
	get("/replica_sync/members", h.members)
	if opts.Metrics != nil {
		r.Handler(http.MethodGet, "/metrics", opts.Metrics.Handler())
		r.Handler(http.MethodHead, "/metrics", opts.Metrics.Handler())
	}
	h.opsRoutes(r, opts)
	if opts.AIBrix != nil {
		path := opts.AIBrixPath
		if path == "" {
			path = "/v1alpha1/select"
		}
		// Every method reaches the AIBrix handler, so that a wrong method is answered with RFC
		// 9457 Problem Details (405) as the AIBrix contract requires, not with Dynamo's body.
		for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead, http.MethodOptions} {
			r.Handler(m, path, opts.AIBrix)
		}
	}
	var open []string
	if opts.AIBrix != nil {
		open = append(open, aibrixPath(opts))
	}
	return &apiHandler{Handler: opts.Auth.wrap(escapedPathRouter{r.Router}, open...), routes: r.routes}
}

// escapedPathRouter routes on the request's escaped path, as axum does, so that a path
// parameter may carry an encoded '/' (a client-chosen selection_id such as "tenant/req-1" is
// sent as tenant%2Freq-1). httprouter matches the decoded URL.Path, where that slash would split
// the segment and the route would not be found. Handlers read parameters through param, which
// unescapes them. Requests whose path has no escapes (the usual case) pass through unchanged.
type escapedPathRouter struct{ r *httprouter.Router }

func (e escapedPathRouter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if ep := req.URL.EscapedPath(); ep != req.URL.Path {
		r2 := *req
		u := *req.URL
		u.Path, u.RawPath = ep, ""
		r2.URL = &u
		req = &r2
	}
	e.r.ServeHTTP(w, req)
}

// param returns the unescaped value of a path parameter. The routed path came from
// url.URL.EscapedPath, which is always validly encoded, so unescaping cannot fail; were it to,
// the segment is returned as routed.
func param(ps httprouter.Params, name string) string {
	s := ps.ByName(name)
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}
