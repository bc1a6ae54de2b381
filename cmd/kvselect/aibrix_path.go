package main

import (
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/kvselect/kvselect/http/api"
)

// validateAIBrixPath refuses an --aibrix-path the HTTP router cannot serve as one literal
// route: a path that is not absolute and clean, a ':' or '*' (httprouter's parameter and
// catch-all markers, which would silently turn the decision endpoint into a wildcard), characters
// that must be escaped on the wire, and a path that collides with a Dynamo route (the route
// table would panic at startup). The collision check builds the real route table, so it stays
// right when routes are added.
func validateAIBrixPath(p string) error {
	bad := func(why string) error { return fmt.Errorf("--aibrix-path %q: %s", p, why) }
	if !strings.HasPrefix(p, "/") {
		return bad("must start with '/'")
	}
	if i := strings.IndexAny(p, ":*"); i >= 0 {
		return bad(fmt.Sprintf("must be a literal path; %q marks a router wildcard (a :name or * segment)", p[i]))
	}
	for _, c := range p {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("%?#\\", c) {
			return bad(fmt.Sprintf("character %q is not allowed (use a plain, unescaped path)", c))
		}
	}
	if path.Clean(p) != p {
		return bad(fmt.Sprintf("must be a clean path (no empty, '.' or '..' segments, no trailing '/'); did you mean %q?", path.Clean(p)))
	}
	if p == "/metrics" {
		return bad("collides with the /metrics route")
	}
	if err := routeTableAccepts(p); err != nil {
		return bad(fmt.Sprintf("collides with a Dynamo selection-service route: %v", err))
	}
	return nil
}

// routeTableAccepts builds the HTTP route table with the AIBrix endpoint at p and reports the
// router's panic on a conflicting route as an error. No request is served, so the service may
// be nil.
func routeTableAccepts(p string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%v", v)
		}
	}()
	api.New(nil, api.Options{AIBrix: http.NotFoundHandler(), AIBrixPath: p})
	return nil
}
