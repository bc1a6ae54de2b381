package api

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/kvselect/kvselect/internal/authtoken"
)

// AuthScope says which Dynamo API requests need a bearer token.
type AuthScope string

// Auth scopes.
const (
	AuthAll    AuthScope = "all"    // every route except /health and /ready
	AuthWrites AuthScope = "writes" // every method except GET and HEAD
)

// ParseAuthScope validates an --auth-scope value.
func ParseAuthScope(s string) (AuthScope, error) {
	switch AuthScope(s) {
	case AuthAll, AuthWrites:
		return AuthScope(s), nil
	}
	return "", fmt.Errorf("--auth-scope must be all or writes, got %q", s)
}

// Auth is optional bearer-token access control for the Dynamo API. Tokens are held as SHA-256
// digests and compared in constant time against every entry (authtoken.Set). The token set can
// be replaced while serving (Reload), so a rotated token file takes effect without a restart;
// a reload that fails keeps the previous set.
//
// Always open, whatever the scope: /health and /ready (probes), and the AIBrix decision
// endpoint, which has its own --aibrix-auth-token-file. A rejected request gets 401 with
// WWW-Authenticate: Bearer and a body that does not say why.
type Auth struct {
	path   string
	scope  AuthScope
	tokens atomic.Pointer[authtoken.Set]
	denied atomic.Uint64
	log    *slog.Logger

	// reloadMu serialises Reload. The watcher calls Reload on every event in the file's
	// directory (other files included), so Reload acts and logs only when the file's content
	// or the failure changed: otherwise a log file in that directory would feed itself.
	reloadMu sync.Mutex
	loaded   [sha256.Size]byte // digest of the content the tokens in force came from
	lastFail string            // the failure last logged ("" after a success)
}

// NewAuth loads the token file at path (one token per line; see authtoken.Load).
func NewAuth(path string, scope AuthScope, log *slog.Logger) (*Auth, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	data, t, err := authtoken.Read(path)
	if err != nil {
		return nil, err
	}
	a := &Auth{path: path, scope: scope, log: log, loaded: sha256.Sum256(data)}
	a.tokens.Store(t)
	return a, nil
}

// Reload re-reads the token file; on error the previous tokens stay in force. A file whose
// content is the one in force changes nothing and logs nothing; a failure is logged once until
// the file changes (it is still returned every time).
func (a *Auth) Reload() error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	data, t, err := authtoken.Read(a.path)
	if err != nil {
		if fail := err.Error() + "\x00" + string(data); fail != a.lastFail {
			a.lastFail = fail
			a.log.Error("auth token file reload failed; keeping the previous tokens", "path", a.path, "err", err)
		}
		return err
	}
	a.lastFail = ""
	if d := sha256.Sum256(data); d != a.loaded {
		a.loaded = d
		a.tokens.Store(t)
		a.log.Info("auth token file reloaded", "path", a.path, "tokens", t.Len())
	}
	return nil
}

// Path is the token file this Auth reads.
func (a *Auth) Path() string { return a.path }

// Denied counts rejected requests.
func (a *Auth) Denied() uint64 { return a.denied.Load() }

var unauthorizedBody = []byte(`{"error":"unauthorized"}`)

// wrap puts the access check in front of next. open lists the exact paths that never need a
// token.
func (a *Auth) wrap(next http.Handler, open ...string) http.Handler {
	if a == nil {
		return next
	}
	openSet := map[string]bool{"/health": true, "/ready": true}
	for _, p := range open {
		openSet[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if openSet[r.URL.Path] || (a.scope == AuthWrites && (r.Method == http.MethodGet || r.Method == http.MethodHead)) {
			next.ServeHTTP(w, r)
			return
		}
		if err := a.tokens.Load().Check(r.Header.Get("Authorization")); err != nil {
			a.denied.Add(1)
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeRaw(w, http.StatusUnauthorized, unauthorizedBody)
			return
		}
		next.ServeHTTP(w, r)
	})
}
