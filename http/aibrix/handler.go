package aibrix

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvselect/kvselect/internal/authtoken"
)

// ErrInvalidConfig wraps every [NewHandler] configuration error.
var ErrInvalidConfig = errors.New("invalid aibrix handler config")

// Config configures a [Handler]. The zero Config is valid: default path, no
// policy, no authentication, 256 KiB body cap, wall clock, crypto/rand.
type Config struct {
	// Path is the operation path (default [DefaultPath]). Other paths get 404.
	Path string
	// Policy is the routing policy; nil makes every valid candidate eligible.
	Policy *Policy
	// Tokens enables bearer authentication when non-nil.
	Tokens *authtoken.Set
	// Sessions stores session bindings. When the policy names a SessionKey
	// and Sessions is nil, an in-memory store is created.
	Sessions SessionStore
	// MaxRequestBytes caps the request body (default 256 KiB); larger → 413.
	MaxRequestBytes int64
	// Now is the clock (default time.Now). Used only for session expiry.
	Now func() time.Time
	// Rand is the entropy source for decision ids (default crypto/rand.Reader).
	// Must be safe for concurrent use.
	Rand io.Reader
}

// Handler serves the AIBrix external replica-selection operation.
// It is safe for concurrent use; all mutable state lives in the
// SessionStore and the buffer pools.
//
// Fields are set once by NewHandler and never written afterwards; the only
// shared mutable state is inside the SessionStore (which synchronises
// itself) and bufs (a sync.Pool).
type Handler struct {
	path     string
	policy   *Policy
	tokens   *authtoken.Set
	sessions SessionStore
	ttl      time.Duration // session TTL: Policy.SessionTTL or DefaultSessionTTL
	maxBody  int64
	now      func() time.Time
	rand     io.Reader
	backend  Backend
	log      *slog.Logger
	bufs     sync.Pool // *[]byte request bodies and response encodings
	slots    sync.Pool // *requestSlot: decoded requests' reusable arrays
}

// NewHandler validates cfg and returns a Handler. backend may be nil (no
// kvselect load accounting); log may be nil (logs are discarded).
func NewHandler(cfg Config, backend Backend, log *slog.Logger) (*Handler, error) {
	h := &Handler{
		path: cfg.Path, policy: cfg.Policy, tokens: cfg.Tokens, sessions: cfg.Sessions,
		maxBody: cfg.MaxRequestBytes, now: cfg.Now, rand: cfg.Rand, backend: backend, log: log,
	}
	if h.path == "" {
		h.path = DefaultPath
	}
	if !strings.HasPrefix(h.path, "/") {
		return nil, fmt.Errorf("%w: path %q must start with '/'", ErrInvalidConfig, h.path)
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultMaxRequestBytes
	}
	if h.maxBody < 0 || h.maxBody > 64<<20 {
		return nil, fmt.Errorf("%w: MaxRequestBytes %d outside 1..64MiB", ErrInvalidConfig, h.maxBody)
	}
	if h.policy != nil {
		if err := h.policy.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		if h.policy.SessionKey != "" && h.sessions == nil {
			h.sessions = NewMemorySessionStore(0)
		}
		// A Policy built in code may leave SessionTTL zero; ParsePolicy
		// fills the default, and so does the handler (without mutating the
		// caller's Policy, which may be shared).
		h.ttl = h.policy.SessionTTL
		if h.ttl <= 0 {
			h.ttl = DefaultSessionTTL
		}
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.rand == nil {
		h.rand = rand.Reader
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// Path returns the operation path the handler answers.
func (h *Handler) Path() string { return h.path }

// getBuf returns a pooled buffer. One buffer serves a whole exchange: it
// first receives the request body and is then overwritten by the encoded
// response, which is safe because DecodeRequest copies what it keeps.
func (h *Handler) getBuf() *[]byte {
	if b, ok := h.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 16<<10)
	return &b
}

func (h *Handler) putBuf(b *[]byte) {
	if cap(*b) > 1<<20 { // do not pin large buffers
		return
	}
	*b = (*b)[:0]
	h.bufs.Put(b)
}

// ServeHTTP implements http.Handler.
//
// Authentication is checked before the media type and the body so that an
// unauthenticated caller learns nothing about what the service accepts
// and cannot make it read large bodies. Every answer is either a 200 with
// the exact protocol media type or Problem Details; a panic anywhere in the
// decision (for example in a Backend) becomes a 500 Problem, never a reset
// connection. Checks run in this order, the first
// failure answering with Problem Details: path (404), method (405, Allow:
// POST), bearer token (401 with WWW-Authenticate), Content-Type and
// Content-Encoding (415), body size (413), body decoding (400),
// X-Request-Id equal to metadata.requestId (400).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			h.log.Error("aibrix: decision panicked", "panic", fmt.Sprint(v))
			writeProblem(w, &Problem{Type: ProblemInternal, Title: "Internal error", Status: http.StatusInternalServerError,
				Detail: "the decision service failed while deciding"})
		}
	}()
	if r.URL.Path != h.path {
		h.fail(w, r, &Problem{Type: ProblemNotFound, Title: "Not found", Status: http.StatusNotFound,
			Detail: "the replica selection operation is served at " + h.path})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, r, &Problem{Type: ProblemMethod, Title: "Method not allowed", Status: http.StatusMethodNotAllowed,
			Detail: "only POST is allowed, got " + r.Method})
		return
	}
	if h.tokens != nil {
		if err := h.tokens.Check(r.Header.Get("Authorization")); err != nil {
			challenge := `Bearer realm="kvselect"`
			detail := "a bearer token is required"
			if errors.Is(err, authtoken.ErrWrong) {
				challenge += `, error="invalid_token"`
				detail = "the bearer token is not accepted"
			}
			w.Header().Set("WWW-Authenticate", challenge)
			h.fail(w, r, &Problem{Type: ProblemUnauthorized, Title: "Unauthorized", Status: http.StatusUnauthorized, Detail: detail})
			return
		}
	}
	if p := checkMediaType(r.Header); p != nil {
		h.fail(w, r, p)
		return
	}
	buf := h.getBuf()
	defer h.putBuf(buf)
	body, p := h.readBody(w, r, (*buf)[:0])
	*buf = body
	if p != nil {
		h.fail(w, r, p)
		return
	}
	slot, _ := h.slots.Get().(*requestSlot)
	if slot == nil {
		slot = new(requestSlot)
	}
	// The slot's arrays back req until the answer is encoded; resp keeps
	// only strings, which do not alias them.
	defer func() { slot.release(); h.slots.Put(slot) }()
	req, err := slot.decode(body)
	if err != nil {
		p := problemFromDecode(err)
		h.fail(w, r, &p)
		return
	}
	if p := checkRequestIDHeader(r.Header, req.RequestID); p != nil {
		h.fail(w, r, p)
		return
	}
	resp, err := h.decide(req)
	if err != nil {
		h.log.Error("aibrix: cannot mint decision id", "err", err)
		writeProblem(w, &Problem{Type: ProblemDecisionIDSource, Title: "Internal error",
			Status: http.StatusInternalServerError, Detail: "no decision id could be generated"})
		return
	}
	out := AppendResponse(body[:0], &resp)
	*buf = out
	hd := w.Header()
	hd["Content-Type"] = mediaTypeHeader
	hd["Content-Length"] = []string{strconv.Itoa(len(out))}
	hd["Cache-Control"] = noStoreHeader
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	if h.log.Enabled(r.Context(), slog.LevelDebug) {
		h.log.Debug("aibrix: decision", "requestId", resp.RequestID, "decisionId", resp.DecisionID,
			"decision", string(resp.Decision), "target", resp.Target.ID, "port", resp.Target.Port, "reason", resp.Reason)
	}
}

// decide runs the policy and session logic for a decoded request. The
// clock is read only when the request carries a session, and the binding
// is written after Evaluate so the pure decision never touches the store.
// Concurrent requests of one session may race to bind; the last Bind wins,
// and both answers were legal, so no lock spans Get and Bind.
func (h *Handler) decide(req *Request) (Response, error) {
	var sticky *Binding
	key, hasSession := SessionKeyFor(req, h.policy)
	var now time.Time
	if hasSession && h.sessions != nil {
		now = h.now()
		if b, ok := h.sessions.Get(key, now); ok {
			sticky = &b
		}
	}
	d := Evaluate(req, h.policy, h.backend, sticky)
	if d.BindSession && h.sessions != nil {
		// Decoded strings share one copy of the whole body; the store
		// keeps its own copies so a binding does not pin that body for
		// the session's lifetime.
		key = SessionKey{Model: strings.Clone(key.Model), Value: strings.Clone(key.Value)}
		h.sessions.Bind(key, Binding{CandidateID: strings.Clone(d.Target.ID), Port: d.Target.Port}, h.ttl, now)
	}
	id, err := NewDecisionID(h.rand)
	if err != nil {
		return Response{}, err
	}
	return Response{RequestID: req.RequestID, DecisionID: id, Decision: d.Decision, Target: d.Target, Reason: d.Reason}, nil
}

// fail logs a client error at debug level (never headers or bodies, so no
// credential can reach the log) and writes the problem.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, p *Problem) {
	if h.log.Enabled(r.Context(), slog.LevelDebug) {
		h.log.Debug("aibrix: request rejected", "status", p.Status, "type", p.Type, "field", p.Field, "remote", r.RemoteAddr)
	}
	writeProblem(w, p)
}

// checkMediaType accepts exactly the protocol media type (type/subtype and
// parameter names case-insensitive per RFC 9110, version value exact) and an
// absent or identity Content-Encoding.
func checkMediaType(hd http.Header) *Problem {
	if enc := hd.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return &Problem{Type: ProblemUnsupportedMedia, Title: "Unsupported content encoding", Status: http.StatusUnsupportedMediaType,
			Detail: "request bodies must not be compressed"}
	}
	ct := hd.Get("Content-Type")
	if ct == MediaType {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil && mt == mediaTypeBase && params["version"] == mediaTypeVersion {
		return nil
	}
	detail := "Content-Type must be " + MediaType
	if ct == "" {
		detail = "missing Content-Type; it must be " + MediaType
	}
	return &Problem{Type: ProblemUnsupportedMedia, Title: "Unsupported media type", Status: http.StatusUnsupportedMediaType, Detail: detail}
}

// Shared header values of successful responses. net/http only reads header values, and
// Header.Set/Add never write into an existing slice of length = capacity 1, so sharing them
// saves two allocations per response.
var (
	mediaTypeHeader = []string{MediaType}
	noStoreHeader   = []string{"no-store"}
)

// readBody reads at most maxBody bytes into dst, answering 413 beyond. A
// declared Content-Length over the cap is refused before reading anything;
// chunked bodies are cut off by http.MaxBytesReader, which also tells the
// server to close the connection instead of draining an oversized body.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, dst []byte) ([]byte, *Problem) {
	tooLarge := func() *Problem {
		return &Problem{Type: ProblemBodyTooLarge, Title: "Request body too large", Status: http.StatusRequestEntityTooLarge,
			Detail: "the request body exceeds " + strconv.FormatInt(h.maxBody, 10) + " bytes"}
	}
	if r.ContentLength > h.maxBody {
		return dst, tooLarge()
	}
	if r.Body == nil {
		return dst, nil
	}
	rd := http.MaxBytesReader(w, r.Body, h.maxBody)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := rd.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return dst, tooLarge()
			}
			return dst, &Problem{Type: ProblemMalformedJSON, Title: "Unreadable body", Status: http.StatusBadRequest,
				Detail: "the request body could not be read completely"}
		}
	}
}

// checkRequestIDHeader enforces X-Request-Id == metadata.requestId. The
// Gateway always sends the header, equal to the body's id; a mismatch means
// a proxy or client bug, and answering it would hide the bug, so it is
// rejected. The header must appear exactly once.
func checkRequestIDHeader(hd http.Header, id string) *Problem {
	vals := hd.Values("X-Request-Id")
	switch {
	case len(vals) == 0:
		return &Problem{Type: ProblemRequestIDHeader, Title: "Missing X-Request-Id header", Status: http.StatusBadRequest,
			Detail: "X-Request-Id is required and must equal metadata.requestId", Field: "metadata.requestId"}
	case len(vals) > 1:
		return &Problem{Type: ProblemRequestIDHeader, Title: "Repeated X-Request-Id header", Status: http.StatusBadRequest,
			Detail: "X-Request-Id must appear exactly once", Field: "metadata.requestId"}
	case vals[0] != id && vals[0] != strings.Trim(id, " \t"):
		// net/http trims spaces and tabs around header values, so a request id that begins or
		// ends with them arrives trimmed in the header; the body's copy is authoritative.
		return &Problem{Type: ProblemRequestIDHeader, Title: "X-Request-Id mismatch", Status: http.StatusBadRequest,
			Detail: "X-Request-Id " + strconv.Quote(vals[0]) + " differs from metadata.requestId " + strconv.Quote(id), Field: "metadata.requestId"}
	}
	return nil
}
