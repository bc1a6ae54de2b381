// Package natsembed runs kvselect's embedded nats-server: single-node (in process, no socket
// unless asked) or one node of an embedded NATS cluster, with kvselect's authentication
// (auth.go), TLS, a monitoring port and its log through slog (log.go). It is its own package so
// that only the binary that starts a server links nats-server; bus connects to a [Server]
// through [bus.InProcessServer].
package natsembed

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/kvselect/kvselect/bus"
)

// Options configures an in-process nats-server.
//
// The zero value is the single-node mode: no listening socket at all,
// clients connect in process ([bus.ConnConfig.Embedded]).
type Options struct {
	// ServerName names the server in logs and cluster gossip. Default: a
	// name derived from the process (nats-server picks one).
	ServerName string
	// ListenAddr, "host:port", opens a client port. The host must be
	// explicit (nats-server's default is 0.0.0.0); port 0 or -1 picks a
	// random port. Empty means no client port, unless the server is
	// clustered: then it listens on 127.0.0.1 with a random port, because
	// a clustered server that does not listen for clients never starts its
	// routes and cannot be shut down (nats-server issue #5174).
	ListenAddr string
	// ClusterName, ClusterListen and ClusterRoutes make this server one
	// node of a NATS cluster. ClusterListen, "host:port", enables clustering;
	// ClusterName is required with it (servers with different names refuse
	// each other's routes). ClusterRoutes lists seed routes as
	// "nats-route://host:port" or "host:port"; one live seed suffices, the
	// servers gossip the rest.
	ClusterName   string
	ClusterListen string
	ClusterRoutes []string
	// MaxPayload overrides the server's max message size (default 1 MiB).
	MaxPayload int32
	// Logger receives the server's log lines; nil discards them.
	Logger *slog.Logger
	// Debug and Trace turn on the server's debug and protocol-trace lines.
	Debug, Trace bool
	// ReadyTimeout bounds startup (default 10 s); ShutdownTimeout bounds
	// Shutdown (default 10 s).
	ReadyTimeout    time.Duration
	ShutdownTimeout time.Duration

	// Auth, when set, turns on authentication and per-replica permissions (auth.go) for
	// client connections; with clustering, routes then authenticate with RouteUser and the
	// secret-derived RoutePassword (the file must have a secret) and the seed routes are given
	// those credentials.
	Auth *bus.AuthFile
	// AuthCluster is the kvselect cluster (subject namespace) the permissions are for; required
	// with Auth.
	AuthCluster string
	// TLSCert and TLSKey turn on TLS for the client port and the route port; TLSCA, when set,
	// also makes routes verify each other's certificates against it (mutual TLS). In-process
	// connections never use TLS.
	TLSCert, TLSKey, TLSCA string
	// HTTPPort opens nats-server's monitoring endpoint (/varz, /connz, /routez...) on the
	// client port's host (127.0.0.1 when there is none); 0 means none, -1 a random port.
	HTTPPort int
}

// Errors from Start and Server.Shutdown.
var (
	// ErrOptions: the options are inconsistent or unparsable.
	ErrOptions = errors.New("natsembed: invalid embedded server options")
	// ErrNotReady: the server did not accept clients in time.
	ErrNotReady = errors.New("natsembed: embedded server not ready")
	// ErrShutdownTimeout: the server did not stop in time; Shutdown gave up
	// waiting (the server keeps stopping in the background).
	ErrShutdownTimeout = errors.New("natsembed: embedded server shutdown timed out")
)

const defaultTimeout = 10 * time.Second

// Server is a running in-process nats-server; it implements [bus.InProcessServer].
//
// Concurrency: all methods are safe for concurrent use. Shutdown is
// idempotent and never blocks longer than ShutdownTimeout.
type Server struct {
	srv             *server.Server
	listening       bool
	shutdownTimeout time.Duration

	once        sync.Once
	shutdownErr error
}

// Start validates opts, starts the server and waits until it
// accepts clients. Signals are never trapped (NoSigs) and JetStream is off.
func Start(opts Options) (*Server, error) {
	sopts, listening, err := opts.serverOptions()
	if err != nil {
		return nil, err
	}
	srv, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOptions, err)
	}
	if opts.Logger != nil {
		srv.SetLoggerV2(NewServerLogger(opts.Logger), opts.Debug, opts.Trace, false)
	}
	e := &Server{srv: srv, listening: listening, shutdownTimeout: cmp.Or(max(opts.ShutdownTimeout, 0), defaultTimeout)}
	go srv.Start()
	ready := cmp.Or(max(opts.ReadyTimeout, 0), defaultTimeout)
	if !srv.ReadyForConnections(ready) {
		_ = e.Shutdown()
		return nil, fmt.Errorf("%w within %v", ErrNotReady, ready)
	}
	return e, nil
}

// serverOptions translates opts; it never returns options that combine a
// cluster port with DontListen.
func (o Options) serverOptions() (*server.Options, bool, error) {
	s := &server.Options{
		ServerName: o.ServerName,
		Host:       "127.0.0.1",
		NoSigs:     true, // never os.Exit on SIGTERM behind our back
		NoLog:      true, // our logger is installed with SetLoggerV2
		JetStream:  false,
		MaxPayload: o.MaxPayload,
	}
	clustered := o.ClusterListen != ""
	if !clustered && (o.ClusterName != "" || len(o.ClusterRoutes) > 0) {
		return nil, false, fmt.Errorf("%w: ClusterName/ClusterRoutes need ClusterListen", ErrOptions)
	}
	listen := o.ListenAddr
	if listen == "" && clustered {
		listen = "127.0.0.1:-1"
	}
	if listen == "" {
		s.DontListen = true
	} else {
		host, port, err := splitListen(listen)
		if err != nil {
			return nil, false, fmt.Errorf("%w: ListenAddr: %w", ErrOptions, err)
		}
		s.Host, s.Port = host, port
	}
	if err := o.applySecurity(s, clustered); err != nil {
		return nil, false, err
	}
	if clustered {
		if o.ClusterName == "" {
			return nil, false, fmt.Errorf("%w: ClusterListen needs ClusterName", ErrOptions)
		}
		host, port, err := splitListen(o.ClusterListen)
		if err != nil {
			return nil, false, fmt.Errorf("%w: ClusterListen: %w", ErrOptions, err)
		}
		s.Cluster = server.ClusterOpts{Name: o.ClusterName, Host: host, Port: port}
		for _, r := range o.ClusterRoutes {
			u, err := parseRoute(r)
			if err != nil {
				return nil, false, fmt.Errorf("%w: route %q: %w", ErrOptions, r, err)
			}
			if o.Auth != nil {
				u.User = url.UserPassword(bus.RouteUser, bus.RoutePassword(o.Auth.Secret))
			}
			s.Routes = append(s.Routes, u)
		}
		if o.Auth != nil {
			s.Cluster.Username, s.Cluster.Password = bus.RouteUser, bus.RoutePassword(o.Auth.Secret)
		}
		if s.TLSConfig != nil {
			rc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.TLSCert, KeyFile: o.TLSKey, CaFile: o.TLSCA, Verify: o.TLSCA != ""})
			if err != nil {
				return nil, false, fmt.Errorf("%w: route TLS: %w", ErrOptions, err)
			}
			// GenTLSConfig fills only ClientCAs (verifying routes that dial in); routes this
			// server dials verify the peer against the same CA.
			rc.RootCAs = rc.ClientCAs
			s.Cluster.TLSConfig, s.Cluster.TLSTimeout = rc, 2
		}
	}
	return s, !s.DontListen, nil
}

// applySecurity installs authentication, TLS and the monitoring port.
func (o Options) applySecurity(s *server.Options, clustered bool) error {
	if o.Auth != nil {
		a, err := NewAuthenticator(o.Auth, o.AuthCluster)
		if err != nil {
			return fmt.Errorf("%w: auth: %w", ErrOptions, err)
		}
		if clustered && o.Auth.Secret == "" {
			return fmt.Errorf("%w: an embedded NATS cluster with auth needs a secret in the auth file (route authentication)", ErrOptions)
		}
		s.CustomClientAuthentication = a
		s.AlwaysEnableNonce = a.RequiresNonce()
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return fmt.Errorf("%w: TLSCert and TLSKey go together", ErrOptions)
	}
	if o.TLSCA != "" && o.TLSCert == "" {
		return fmt.Errorf("%w: TLSCA needs TLSCert and TLSKey", ErrOptions)
	}
	if o.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: o.TLSCert, KeyFile: o.TLSKey})
		if err != nil {
			return fmt.Errorf("%w: TLS: %w", ErrOptions, err)
		}
		s.TLSConfig, s.TLS, s.TLSTimeout = tc, true, 2
	}
	if o.HTTPPort != 0 {
		if o.HTTPPort < -1 || o.HTTPPort > 65535 {
			return fmt.Errorf("%w: HTTPPort %d", ErrOptions, o.HTTPPort)
		}
		s.HTTPHost, s.HTTPPort = s.Host, o.HTTPPort
	}
	return nil
}

// MonitorURL returns "http://host:port" of the monitoring endpoint, or "" without one.
func (e *Server) MonitorURL() string {
	a := e.srv.MonitorAddr()
	if a == nil {
		return ""
	}
	return "http://" + a.String()
}

// splitListen parses "host:port" with an explicit host; port 0 becomes -1
// because nats-server reads 0 as "use 4222".
func splitListen(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		return "", 0, fmt.Errorf("%q: host must be explicit (nats-server would bind 0.0.0.0)", addr)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%q: bad port", addr)
	}
	if port == 0 {
		port = -1
	}
	return host, port, nil
}

func parseRoute(r string) (*url.URL, error) {
	if !strings.Contains(r, "://") {
		r = "nats-route://" + r
	}
	u, err := url.Parse(r)
	if err != nil {
		return nil, err
	}
	if u.Hostname() == "" || u.Port() == "" {
		return nil, errors.New("need host:port")
	}
	return u, nil
}

// Server returns the underlying server (for tests and diagnostics).
func (e *Server) Server() *server.Server { return e.srv }

// InProcessConn implements nats.InProcessConnProvider, so
// nats.InProcessServer(e) connects without a socket.
func (e *Server) InProcessConn() (net.Conn, error) { return e.srv.InProcessConn() }

// ClientURL returns "nats://host:port" of the client listener, or "" when
// the server does not listen (in-process only).
func (e *Server) ClientURL() string {
	if !e.listening {
		return ""
	}
	return e.srv.ClientURL()
}

// ClusterURL returns "nats-route://host:port" of the route listener, or ""
// when the server is not clustered. Give it to other servers as a route.
func (e *Server) ClusterURL() string {
	a := e.srv.ClusterAddr()
	if a == nil {
		return ""
	}
	return "nats-route://" + a.String()
}

// NumRoutes returns the number of active routes (route pooling makes it a
// multiple of the number of peers; compare with >=).
func (e *Server) NumRoutes() int { return e.srv.NumRoutes() }

// Shutdown stops the server, closing every client connection, and waits
// for it to finish. It returns [ErrShutdownTimeout] instead of hanging if
// the server does not stop within ShutdownTimeout. Later calls return the
// first call's result at once.
func (e *Server) Shutdown() error {
	e.once.Do(func() {
		done := make(chan struct{})
		go func() {
			e.srv.Shutdown()
			e.srv.WaitForShutdown()
			close(done)
		}()
		t := time.NewTimer(e.shutdownTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			e.shutdownErr = fmt.Errorf("%w after %v", ErrShutdownTimeout, e.shutdownTimeout)
		}
	})
	return e.shutdownErr
}
