package aibrix

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTokens(t *testing.T) {
	tok, err := ParseTokens([]byte("# comment\n\n  alpha-1.token_~+/==  \r\nbeta\n"))
	if err != nil {
		t.Fatalf("ParseTokens: %v", err)
	}
	if tok.Len() != 2 {
		t.Fatalf("Len = %d", tok.Len())
	}
	tests := []struct {
		header string
		want   error
	}{
		{"Bearer alpha-1.token_~+/==", nil},
		{"bearer beta", nil},
		{"BEARER beta ", nil},
		{"", ErrMissingToken},
		{"Basic YWxhZGRpbjpvcGVuc2VzYW1l", ErrMissingToken},
		{"Bearer ", ErrMissingToken},
		{"Bearer", ErrMissingToken},
		{"Bearer gamma", ErrWrongToken},
		{"Bearer bet", ErrWrongToken},
		{"Bearer betaa", ErrWrongToken},
	}
	for _, tt := range tests {
		if err := tok.Check(tt.header); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("Check(%q) = %v, want %v", tt.header, err, tt.want)
		}
	}
}

func TestParseTokensErrors(t *testing.T) {
	secret := "s3cr3t token"
	tests := []struct{ name, data, want string }{
		{"empty", "", "no tokens"},
		{"comments only", "# a\n\n", "no tokens"},
		{"space inside", "ok\n" + secret + "\n", "line 2"},
		{"bad char", "to:ken\n", "line 1"},
		{"padding in middle", "ab=c\n", "line 1"},
		{"too long", strings.Repeat("a", MaxTokenBytes+1), "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTokens([]byte(tt.data))
			if !errors.Is(err, ErrInvalidTokens) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "to:ken") {
				t.Fatalf("error leaks the token: %v", err)
			}
		})
	}
}

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokens")
	if err := os.WriteFile(p, []byte("tok1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := LoadTokens(p)
	if err != nil || tok.Check("Bearer tok1") != nil {
		t.Fatalf("LoadTokens = %v, %v", tok, err)
	}
	if _, err := LoadTokens(filepath.Join(dir, "missing")); !errors.Is(err, ErrInvalidTokens) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file err = %v", err)
	}
}
