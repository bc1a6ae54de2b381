package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The --auth-token-file rotation end to end: the real binary, its real file watcher, tokens
// replaced on disk the ways operators and Kubernetes do it. A file that fails to load (see
// authtoken.Parse: empty, only comments, a line outside the RFC 6750 token alphabet, a token
// over MaxTokenBytes, or no file at all) keeps the previous tokens, all of them: a broken file's
// valid lines are not taken either.

const (
	reloadOK     = "auth token file reloaded"
	reloadFailed = "auth token file reload failed; keeping the previous tokens"
)

// status is GET /workers with the bearer token tok ("" sends none).
func (p *proc) status(t *testing.T, tok string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.base+"/workers", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := (&http.Client{Timeout: binDeadline}).Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// wantTokens asserts which tokens the running binary accepts right now.
func (p *proc) wantTokens(t *testing.T, accepted []string, rejected ...string) {
	t.Helper()
	for _, tok := range accepted {
		if code := p.status(t, tok); code != http.StatusOK {
			t.Fatalf("token %.12q: %d, want 200", tok, code)
		}
	}
	for _, tok := range append(rejected, "") {
		if code := p.status(t, tok); code != http.StatusUnauthorized {
			t.Fatalf("token %.12q: %d, want 401", tok, code)
		}
	}
}

// replaceAtomic writes content to a temporary file beside path and renames it over path.
func replaceAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tokens.tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestAuthTokenFileRotation(t *testing.T) {
	const (
		tokA = "token-A-0123456789abcdef"
		tokB = "token-B-0123456789abcdef"
		tokC = "token-C-0123456789abcdef"
		tokD = "token-D-0123456789abcdef"
	)
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("# API tokens\n"+tokA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startKVSelect(t, nil, "--auth-token-file", path, "--auth-scope", "all")
	eventually(t, "/health", func() bool { c, _, _ := p.do("GET", "/health", ""); return c == http.StatusOK })
	p.wantTokens(t, []string{tokA}, tokB)

	// Rotation by atomic rename: B replaces A without a restart.
	replaceAtomic(t, path, tokB+"\n")
	eventually(t, "token B accepted", func() bool { return p.status(t, tokB) == http.StatusOK })
	p.wantTokens(t, []string{tokB}, tokA)

	// Every kind of broken file is reported and changes nothing.
	for _, tc := range []struct {
		name    string
		replace func()
	}{
		{"truncated to empty in place", func() {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"only comments and blank lines", func() { replaceAtomic(t, path, "# rotated out\n\n   \n") }},
		{"a valid token beside a line outside the token alphabet", func() { replaceAtomic(t, path, tokC+"\nnot a token\n") }},
		{"a token over MaxTokenBytes", func() { replaceAtomic(t, path, tokC+"\n"+strings.Repeat("x", 8193)+"\n") }},
		{"the file removed", func() {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		failures := strings.Count(p.log.String(), reloadFailed)
		tc.replace()
		eventually(t, tc.name+": reload failure logged", func() bool { return strings.Count(p.log.String(), reloadFailed) > failures })
		p.wantTokens(t, []string{tokB}, tokA, tokC)
	}

	// The watch survived the failures: a good file (two tokens) is taken again.
	oks := strings.Count(p.log.String(), reloadOK)
	replaceAtomic(t, path, tokC+"\n"+tokD+"\n")
	eventually(t, "tokens C and D accepted", func() bool { return p.status(t, tokC) == http.StatusOK })
	if strings.Count(p.log.String(), reloadOK) <= oks {
		t.Fatal("no reload logged for the good file")
	}
	p.wantTokens(t, []string{tokC, tokD}, tokA, tokB)
	// Probes stay open throughout.
	p.mustDo(t, "GET", "/health", "", http.StatusOK)
}
