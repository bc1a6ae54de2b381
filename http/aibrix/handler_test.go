package aibrix

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/internal/authtoken"
)

// post sends body to url with the protocol headers plus extra ones.
func post(t testing.TB, client *http.Client, url string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", MediaType)
	req.Header.Set("Accept", MediaType)
	req.Header.Set("X-Request-Id", "req-123")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

type logCapture struct{ bytes.Buffer }

func newServer(t testing.TB, cfg Config, backend Backend) (*httptest.Server, *logCapture) {
	t.Helper()
	var logs logCapture
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := NewHandler(cfg, backend, log)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, &logs
}

func TestHandlerSelected(t *testing.T) {
	srv, _ := newServer(t, Config{}, nil)
	resp, body := post(t, srv.Client(), srv.URL+DefaultPath, mustJSON(t, baseDoc()), nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != MediaType {
		t.Fatalf("status %d, content type %q, body %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var got struct {
		APIVersion, Kind string
		Metadata         struct{ RequestID, DecisionID string }
		Status           struct {
			Decision string
			Target   struct {
				ID   string
				Port int
			}
		}
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.RequestID != "req-123" || len(got.Metadata.DecisionID) != 36 || got.Status.Decision != "Selected" {
		t.Fatalf("response = %s", body)
	}
	// Candidate a has 4 running requests and high KV usage, b nothing.
	if got.Status.Target.ID != "default/llama-3-b" || got.Status.Target.Port != 8000 {
		t.Fatalf("target = %+v", got.Status.Target)
	}
	if bytes.Contains(body, []byte("null")) || bytes.ContainsAny(body, " \n") {
		t.Fatalf("response must be compact and null-free: %s", body)
	}
}

func TestHandlerEchoesRequestIDExactly(t *testing.T) {
	srv, _ := newServer(t, Config{}, nil)
	id := `a"b\c<d>&é` + "\u2028"
	d := baseDoc()
	d["metadata"] = map[string]any{"requestId": id}
	resp, body := post(t, srv.Client(), srv.URL+DefaultPath, mustJSON(t, d), map[string]string{"X-Request-Id": id})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var got struct{ Metadata struct{ RequestID string } }
	if err := json.Unmarshal(body, &got); err != nil || got.Metadata.RequestID != id {
		t.Fatalf("echo = %q (%v), want %q", got.Metadata.RequestID, err, id)
	}
}

func TestHandlerDecisionIDsUnique(t *testing.T) {
	srv, _ := newServer(t, Config{}, nil)
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		_, body := post(t, srv.Client(), srv.URL+DefaultPath, mustJSON(t, baseDoc()), nil)
		var got struct{ Metadata struct{ DecisionID string } }
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if seen[got.Metadata.DecisionID] {
			t.Fatalf("decision id %q repeated", got.Metadata.DecisionID)
		}
		seen[got.Metadata.DecisionID] = true
	}
}

// TestHandlerProblems covers each HTTP-level rejection: status, problem
// media type, title, and the headers the status requires.
func TestHandlerProblems(t *testing.T) {
	tok, err := authtoken.Parse([]byte("good-token\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, logs := newServer(t, Config{Tokens: tok}, nil)
	auth := map[string]string{"Authorization": "Bearer good-token"}
	withAuth := func(m map[string]string) map[string]string {
		out := map[string]string{"Authorization": "Bearer good-token"}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	big := baseDoc()
	var cs []any
	for i := 0; i < 1200; i++ { // ~240 bytes each
		cs = append(cs, map[string]any{"id": "default/pod-" + strings.Repeat("x", 200) + string(rune('a'+i%26)) + strings.Repeat("y", i/26), "ports": []any{8000}})
	}
	spec(big)["candidates"] = cs
	if n := len(mustJSON(t, big)); n <= DefaultMaxRequestBytes {
		t.Fatalf("oversized fixture is only %d bytes", n)
	}
	tests := []struct {
		name    string
		method  string
		path    string
		body    []byte
		hdr     map[string]string
		status  int
		ptype   string
		wantHdr [2]string
	}{
		{"no token", "POST", DefaultPath, mustJSON(t, baseDoc()), nil, 401, ProblemUnauthorized, [2]string{"WWW-Authenticate", `Bearer realm="kvselect"`}},
		{"wrong token", "POST", DefaultPath, mustJSON(t, baseDoc()), map[string]string{"Authorization": "Bearer bad-token"}, 401, ProblemUnauthorized,
			[2]string{"WWW-Authenticate", `Bearer realm="kvselect", error="invalid_token"`}},
		{"basic auth", "POST", DefaultPath, mustJSON(t, baseDoc()), map[string]string{"Authorization": "Basic Z29vZC10b2tlbg=="}, 401, ProblemUnauthorized, [2]string{}},
		{"get", "GET", DefaultPath, nil, auth, 405, ProblemMethod, [2]string{"Allow", "POST"}},
		{"put", "PUT", DefaultPath, mustJSON(t, baseDoc()), auth, 405, ProblemMethod, [2]string{"Allow", "POST"}},
		{"wrong path", "POST", "/v1alpha1/selectx", mustJSON(t, baseDoc()), auth, 404, ProblemNotFound, [2]string{}},
		{"json content type", "POST", DefaultPath, mustJSON(t, baseDoc()), withAuth(map[string]string{"Content-Type": "application/json"}), 415, ProblemUnsupportedMedia, [2]string{}},
		{"missing content type", "POST", DefaultPath, mustJSON(t, baseDoc()), withAuth(map[string]string{"Content-Type": ""}), 415, ProblemUnsupportedMedia, [2]string{}},
		{"wrong version", "POST", DefaultPath, mustJSON(t, baseDoc()), withAuth(map[string]string{"Content-Type": "application/vnd.aibrix.external-routing+json;version=v1"}), 415, ProblemUnsupportedMedia, [2]string{}},
		{"gzip body", "POST", DefaultPath, mustJSON(t, baseDoc()), withAuth(map[string]string{"Content-Encoding": "gzip"}), 415, ProblemUnsupportedMedia, [2]string{}},
		{"too large", "POST", DefaultPath, mustJSON(t, big), auth, 413, ProblemBodyTooLarge, [2]string{}},
		{"empty", "POST", DefaultPath, nil, auth, 400, ProblemEmptyBody, [2]string{}},
		{"malformed", "POST", DefaultPath, []byte(`{"apiVersion"`), auth, 400, ProblemMalformedJSON, [2]string{}},
		{"duplicate", "POST", DefaultPath, []byte(`{"kind":"a","kind":"a"}`), auth, 400, ProblemDuplicateMember, [2]string{}},
		{"trailing", "POST", DefaultPath, append(mustJSON(t, baseDoc()), "{}"...), auth, 400, ProblemTrailingData, [2]string{}},
		{"schema", "POST", DefaultPath, set("apiVersion", "v1")(), auth, 400, ProblemInvalidRequest, [2]string{}},
		{"missing X-Request-Id", "POST", DefaultPath, mustJSON(t, baseDoc()), withAuth(map[string]string{"X-Request-Id": ""}), 400, ProblemRequestIDHeader, [2]string{}},
		{"mismatched X-Request-Id", "POST", DefaultPath, mustJSON(t, baseDoc()), withAuth(map[string]string{"X-Request-Id": "req-124"}), 400, ProblemRequestIDHeader, [2]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, bytes.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", MediaType)
			req.Header.Set("X-Request-Id", "req-123")
			for k, v := range tt.hdr {
				if v == "" {
					req.Header.Del(k)
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != ProblemMediaType {
				t.Fatalf("content type %q", ct)
			}
			var p struct {
				Type, Title, Detail string
				Status              int
			}
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("problem body %s: %v", body, err)
			}
			if p.Type != tt.ptype || p.Status != tt.status || p.Title == "" || p.Detail == "" {
				t.Fatalf("problem = %+v, want type %s", p, tt.ptype)
			}
			if tt.wantHdr[0] != "" && resp.Header.Get(tt.wantHdr[0]) != tt.wantHdr[1] {
				t.Fatalf("%s = %q, want %q", tt.wantHdr[0], resp.Header.Get(tt.wantHdr[0]), tt.wantHdr[1])
			}
			if bytes.Contains(body, []byte("good-token")) || bytes.Contains(body, []byte("bad-token")) {
				t.Fatalf("problem body leaks a token: %s", body)
			}
		})
	}
	if strings.Contains(logs.String(), "good-token") || strings.Contains(logs.String(), "bad-token") {
		t.Fatalf("logs leak a token:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "request rejected") {
		t.Fatalf("rejections are not logged:\n%s", logs.String())
	}
}

func TestHandlerAcceptsMediaTypeVariants(t *testing.T) {
	srv, _ := newServer(t, Config{}, nil)
	for _, ct := range []string{
		MediaType,
		"application/vnd.aibrix.external-routing+json; version=v1alpha1",
		`Application/VND.aibrix.External-Routing+JSON; Version="v1alpha1"; charset=utf-8`,
	} {
		resp, body := post(t, srv.Client(), srv.URL+DefaultPath, mustJSON(t, baseDoc()), map[string]string{"Content-Type": ct})
		if resp.StatusCode != 200 {
			t.Errorf("Content-Type %q: status %d %s", ct, resp.StatusCode, body)
		}
	}
}

func TestHandlerModesNeverIllegal(t *testing.T) {
	pol := mustPolicy(t, "requirements:\n- {attribute: gpu, values: [h100]}\n")
	srv, _ := newServer(t, Config{Policy: pol}, nil)
	for _, mode := range []string{"Advisory", "Authoritative"} {
		d := baseDoc()
		spec(d)["policyMode"] = mode
		_, body := post(t, srv.Client(), srv.URL+DefaultPath, mustJSON(t, d), nil)
		var got struct {
			Status struct {
				Decision string
				Target   *json.RawMessage
				Reason   string
			}
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"Advisory": "NoDecision", "Authoritative": "Denied"}[mode]
		if got.Status.Decision != want || got.Status.Target != nil || got.Status.Reason != DefaultNoMatchReason {
			t.Fatalf("%s: %s", mode, body)
		}
	}
}

// fixedClock is an injectable clock advanced explicitly by tests.
type fixedClock struct{ t time.Time }

func (c *fixedClock) now() time.Time { return c.t }

func TestHandlerSessionsStick(t *testing.T) {
	pol := mustPolicy(t, "sessionKey: sid\nsessionTTL: 1m\n")
	clock := &fixedClock{t: time.Unix(1_000, 0)}
	store := NewMemorySessionStore(0)
	srv, _ := newServer(t, Config{Policy: pol, Now: clock.now, Sessions: store}, nil)
	decide := func(running map[string]int, sid string) string {
		d := baseDoc()
		if sid != "" {
			spec(d)["policyContext"] = map[string]any{"attributes": map[string]any{"sid": sid}}
		}
		var cs []any
		for _, id := range []string{"ns/a", "ns/b", "ns/c"} {
			if n, ok := running[id]; ok {
				cs = append(cs, map[string]any{"id": id, "ports": []any{8000}, "metrics": map[string]any{"runningRequests": n}})
			}
		}
		spec(d)["candidates"] = cs
		resp, body := post(t, srv.Client(), srv.URL+DefaultPath, mustJSON(t, d), nil)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d %s", resp.StatusCode, body)
		}
		var got struct {
			Status struct{ Target struct{ ID string } }
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		return got.Status.Target.ID
	}
	if got := decide(map[string]int{"ns/a": 0, "ns/b": 5}, "s1"); got != "ns/a" {
		t.Fatalf("first decision = %s", got)
	}
	// Load shifts, but the session sticks.
	if got := decide(map[string]int{"ns/a": 9, "ns/b": 0}, "s1"); got != "ns/a" {
		t.Fatalf("sticky decision = %s", got)
	}
	// Without a session the load decides.
	if got := decide(map[string]int{"ns/a": 9, "ns/b": 0}, ""); got != "ns/b" {
		t.Fatalf("sessionless decision = %s", got)
	}
	// The bound candidate leaves the snapshot: rebind elsewhere.
	if got := decide(map[string]int{"ns/b": 3, "ns/c": 0}, "s1"); got != "ns/c" {
		t.Fatalf("rebinding decision = %s", got)
	}
	if got := decide(map[string]int{"ns/a": 0, "ns/b": 3, "ns/c": 5}, "s1"); got != "ns/c" {
		t.Fatalf("rebound session must stick to ns/c, got %s", got)
	}
	// TTL expiry through the injected clock.
	clock.t = clock.t.Add(2 * time.Minute)
	if got := decide(map[string]int{"ns/a": 0, "ns/b": 3, "ns/c": 5}, "s1"); got != "ns/a" {
		t.Fatalf("expired session must follow load, got %s", got)
	}
}

type panicBackend struct{}

func (panicBackend) CandidateLoad(string, string) ([]RankLoad, bool) { panic("backend exploded") }

func TestHandlerRecoversBackendPanic(t *testing.T) {
	srv, logs := newServer(t, Config{}, panicBackend{})
	resp, body := post(t, srv.Client(), srv.URL+DefaultPath, mustJSON(t, baseDoc()), nil)
	if resp.StatusCode != 500 || resp.Header.Get("Content-Type") != ProblemMediaType {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(logs.String(), "backend exploded") {
		t.Fatalf("panic not logged: %s", logs.String())
	}
}

func TestHandlerEntropyFailure(t *testing.T) {
	srv, _ := newServer(t, Config{Rand: strings.NewReader("")}, nil)
	resp, body := post(t, srv.Client(), srv.URL+DefaultPath, mustJSON(t, baseDoc()), nil)
	if resp.StatusCode != 500 || !bytes.Contains(body, []byte(ProblemDecisionIDSource)) {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
}

func TestNewHandlerConfig(t *testing.T) {
	if _, err := NewHandler(Config{Path: "select"}, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("relative path err = %v", err)
	}
	if _, err := NewHandler(Config{MaxRequestBytes: -1}, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative limit err = %v", err)
	}
	bad := &Policy{Preferences: []Preference{{Attribute: "zone", Values: ValueSet{"a"}}}}
	if _, err := NewHandler(Config{Policy: bad}, nil, nil); !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("invalid policy err = %v", err)
	}
	h, err := NewHandler(Config{Path: "/custom", Policy: mustPolicy(t, "sessionKey: sid\n")}, nil, nil)
	if err != nil || h.Path() != "/custom" || h.sessions == nil {
		t.Fatalf("custom handler = %+v, %v", h, err)
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/custom", bytes.NewReader(mustJSON(t, baseDoc())))
	r.Header.Set("Content-Type", MediaType)
	r.Header.Set("X-Request-Id", "req-123")
	h.ServeHTTP(rec, r)
	if rec.Code != 200 {
		t.Fatalf("custom path status %d %s", rec.Code, rec.Body)
	}
}

func TestHandlerSmallBodyLimit(t *testing.T) {
	srv, _ := newServer(t, Config{MaxRequestBytes: 64}, nil)
	// Chunked (unknown length) body: the limit is enforced while reading.
	req, _ := http.NewRequest("POST", srv.URL+DefaultPath, io.NopCloser(bytes.NewReader(mustJSON(t, baseDoc()))))
	req.Header.Set("Content-Type", MediaType)
	req.Header.Set("X-Request-Id", "req-123")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}

func TestHandlerDefaultsSessionTTLForCodePolicies(t *testing.T) {
	store := NewMemorySessionStore(0)
	clock := &fixedClock{t: time.Unix(5_000, 0)}
	h, err := NewHandler(Config{Policy: &Policy{SessionKey: "sid"}, Sessions: store, Now: clock.now}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := baseDoc()
	spec(d)["policyContext"] = map[string]any{"attributes": map[string]any{"sid": "s9"}}
	r := httptest.NewRequest("POST", DefaultPath, bytes.NewReader(mustJSON(t, d)))
	r.Header.Set("Content-Type", MediaType)
	r.Header.Set("X-Request-Id", "req-123")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != 200 {
		t.Fatalf("status %d %s", rec.Code, rec.Body)
	}
	b, ok := store.Get(SessionKey{Model: "llama-3", Value: "s9"}, clock.t.Add(DefaultSessionTTL-time.Second))
	if !ok || b.CandidateID != "default/llama-3-b" {
		t.Fatalf("binding = %+v, %v; a zero SessionTTL must default, not disable", b, ok)
	}
}
