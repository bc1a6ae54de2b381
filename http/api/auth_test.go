package api_test

// Bearer-token access control over real HTTP: scope all and writes, probes and the AIBrix
// endpoint always open, 401 without detail and with WWW-Authenticate, token rotation by Reload.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/http/api"
)

func authServer(t *testing.T, scope api.AuthScope, tokens string) (*httptest.Server, *api.Auth, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := api.NewAuth(path, scope, nil)
	if err != nil {
		t.Fatal(err)
	}
	aibrix := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	svc := newService(t)
	srv := httptest.NewServer(api.New(svc, api.Options{Auth: a, AIBrix: aibrix, Metrics: api.NewMetrics(svc)}))
	t.Cleanup(srv.Close)
	return srv, a, path
}

func authCall(t *testing.T, srv *httptest.Server, method, path, token string) (int, http.Header, string) {
	t.Helper()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader(`{"worker_id":1,"endpoint":"http://w:8000"}`)
	}
	req, _ := http.NewRequest(method, srv.URL+path, body)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, string(b)
}

func TestAuthScopeAll(t *testing.T) {
	srv, _, _ := authServer(t, api.AuthAll, "# ops\nsecret-one\n\nsecret-two\n")
	var denied string
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/workers", "", 401},
		{"GET", "/workers", "Bearer wrong", 401},
		{"GET", "/workers", "Basic c2VjcmV0LW9uZQ==", 401},
		{"GET", "/workers", "Bearer secret-one-and-more", 401},
		{"POST", "/workers", "", 401},
		{"GET", "/metrics", "", 401},
		{"GET", "/openapi.json", "", 401},
		{"GET", "/status", "", 401},
		{"GET", "/workers", "Bearer secret-one", 200},
		{"GET", "/workers", "bearer secret-two", 200},
		{"POST", "/workers", "Bearer secret-two", 201},
		{"GET", "/health", "", 200},
		{"GET", "/ready", "", 503}, // open: answers readiness (no schedulable worker), not 401
		{"HEAD", "/health", "", 200},
		{"POST", "/v1alpha1/select", "", http.StatusTeapot}, // its own --aibrix-auth-token-file
	} {
		code, hdr, body := authCall(t, srv, c.method, c.path, c.token)
		if code != c.want {
			t.Errorf("%s %s (%q): %d %s, want %d", c.method, c.path, c.token, code, body, c.want)
			continue
		}
		if code == 401 {
			if hdr.Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("%s %s: WWW-Authenticate %q", c.method, c.path, hdr.Get("WWW-Authenticate"))
			}
			// No detail: missing, wrong and malformed credentials get the same answer.
			if denied == "" {
				denied = body
			} else if body != denied {
				t.Errorf("401 bodies differ: %q vs %q", body, denied)
			}
		}
	}
}

func TestAuthScopeWrites(t *testing.T) {
	srv, a, _ := authServer(t, api.AuthWrites, "tok\n")
	for _, c := range []struct {
		method, path, token string
		want                int
	}{
		{"GET", "/workers", "", 200},
		{"GET", "/loads", "", 200},
		{"GET", "/ui", "", 200},
		{"POST", "/workers", "", 401},
		{"DELETE", "/workers/1", "", 401},
		{"POST", "/workers", "Bearer tok", 201},
		{"DELETE", "/workers/1", "Bearer tok", 200},
	} {
		if code, _, body := authCall(t, srv, c.method, c.path, c.token); code != c.want {
			t.Errorf("%s %s (%q): %d %s, want %d", c.method, c.path, c.token, code, body, c.want)
		}
	}
	if a.Denied() != 2 {
		t.Errorf("Denied() = %d, want 2", a.Denied())
	}
}

func TestAuthReload(t *testing.T) {
	srv, a, path := authServer(t, api.AuthAll, "old\n")
	if code, _, _ := authCall(t, srv, "GET", "/workers", "Bearer old"); code != 200 {
		t.Fatalf("old token: %d", code)
	}
	if err := os.WriteFile(path, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := authCall(t, srv, "GET", "/workers", "Bearer old"); code != 401 {
		t.Errorf("rotated-out token: %d, want 401", code)
	}
	if code, _, _ := authCall(t, srv, "GET", "/workers", "Bearer new"); code != 200 {
		t.Errorf("new token: %d, want 200", code)
	}
	// A broken file keeps the tokens in force.
	if err := os.WriteFile(path, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil {
		t.Fatal("Reload of an empty token file succeeded")
	}
	if code, _, _ := authCall(t, srv, "GET", "/workers", "Bearer new"); code != 200 {
		t.Errorf("after a failed reload: %d, want 200", code)
	}
}

func TestParseAuthScope(t *testing.T) {
	for _, s := range []string{"all", "writes"} {
		if _, err := api.ParseAuthScope(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := api.ParseAuthScope("reads"); err == nil {
		t.Error("accepted scope reads")
	}
}
