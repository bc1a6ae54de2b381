package main

import (
	"flag"
	"fmt"

	"github.com/kvselect/kvselect/http/api"
)

// limitOptions are the --http-* server limits (issue 15); defaults are api.DefaultLimits.
type limitOptions struct {
	http api.Limits
}

// registerLimitFlags adds the limit flags to fs.
func registerLimitFlags(fs *flag.FlagSet, o *limitOptions) {
	d := api.DefaultLimits()
	fs.DurationVar(&o.http.ReadHeaderTimeout, "http-read-header-timeout", d.ReadHeaderTimeout, "HTTP: cut a client that has not sent its request headers within this time")
	fs.DurationVar(&o.http.ReadTimeout, "http-read-timeout", d.ReadTimeout, "HTTP: cut a request (headers and body) not read within this time: a slow body gets 408 (0 = none)")
	fs.DurationVar(&o.http.WriteTimeout, "http-write-timeout", d.WriteTimeout, "HTTP: bound on writing one response (0 = none; GET /dump streams)")
	fs.DurationVar(&o.http.IdleTimeout, "http-idle-timeout", d.IdleTimeout, "HTTP: close keep-alive connections idle this long")
	fs.IntVar(&o.http.MaxHeaderBytes, "http-max-header-bytes", d.MaxHeaderBytes, "HTTP: request header size limit (431 beyond it)")
	fs.IntVar(&o.http.MaxConns, "http-max-conns", d.MaxConns, "HTTP: open client connections; beyond it a connection is answered 503 at once and closed (0 = unlimited)")
	fs.Int64Var(&o.http.MaxBodyBytesInFlight, "http-max-body-bytes-in-flight", d.MaxBodyBytesInFlight, "HTTP: memory held by request bodies being read, over all requests; beyond it a request gets 503 (0 = unlimited)")
}

// validateLimits rejects negative limits.
func (o *limitOptions) validate() error {
	l := o.http
	if l.ReadHeaderTimeout < 0 || l.ReadTimeout < 0 || l.WriteTimeout < 0 || l.IdleTimeout < 0 || l.MaxHeaderBytes < 0 || l.MaxConns < 0 || l.MaxBodyBytesInFlight < 0 {
		return fmt.Errorf("--http-* limits must not be negative")
	}
	return nil
}
