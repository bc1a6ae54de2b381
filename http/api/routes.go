package api

import (
	"net/http"
	"slices"

	"github.com/julienschmidt/httprouter"
)

// Route is one registered (method, path) pair, with the path in httprouter syntax
// (/workers/:worker_id).
type Route struct{ Method, Path string }

// routeRecorder registers routes on an httprouter.Router and remembers them, so the route table
// can be listed (for the OpenAPI coverage test and the deployment checks) without a second copy
// of it. Only the registration methods New uses are wrapped; others would bypass the record, so
// New must not call them.
type routeRecorder struct {
	*httprouter.Router
	routes []Route
}

func newRouteRecorder() *routeRecorder { return &routeRecorder{Router: httprouter.New()} }

func (r *routeRecorder) add(method, path string) { r.routes = append(r.routes, Route{method, path}) }

// The method shorthands all go through Handle, so every route is recorded exactly once.
func (r *routeRecorder) GET(path string, h httprouter.Handle)   { r.Handle(http.MethodGet, path, h) }
func (r *routeRecorder) HEAD(path string, h httprouter.Handle)  { r.Handle(http.MethodHead, path, h) }
func (r *routeRecorder) POST(path string, h httprouter.Handle)  { r.Handle(http.MethodPost, path, h) }
func (r *routeRecorder) PUT(path string, h httprouter.Handle)   { r.Handle(http.MethodPut, path, h) }
func (r *routeRecorder) PATCH(path string, h httprouter.Handle) { r.Handle(http.MethodPatch, path, h) }
func (r *routeRecorder) DELETE(path string, h httprouter.Handle) {
	r.Handle(http.MethodDelete, path, h)
}
func (r *routeRecorder) Handle(method, path string, h httprouter.Handle) {
	r.add(method, path)
	r.Router.Handle(method, path, h)
}
func (r *routeRecorder) Handler(method, path string, h http.Handler) {
	r.add(method, path)
	r.Router.Handler(method, path, h)
}
func (r *routeRecorder) HandlerFunc(method, path string, h http.HandlerFunc) {
	r.add(method, path)
	r.Router.HandlerFunc(method, path, h)
}

// apiHandler is the handler New returns: the router behind the optional access control, with
// the route table it was built from.
type apiHandler struct {
	http.Handler
	routes []Route
}

// Routes lists the routes of a handler built by New, in registration order (HEAD routes
// included); nil for any other handler.
func Routes(h http.Handler) []Route {
	if a, ok := h.(*apiHandler); ok {
		return slices.Clone(a.routes)
	}
	return nil
}
