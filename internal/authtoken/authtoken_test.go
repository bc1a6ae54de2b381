package authtoken

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tok, err := Parse([]byte("# comment\n\n  alpha-1.token_~+/==  \r\nbeta\n"))
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
		{"", ErrMissing},
		{"Basic YWxhZGRpbjpvcGVuc2VzYW1l", ErrMissing},
		{"Bearer ", ErrMissing},
		{"Bearer", ErrMissing},
		{"Bearer gamma", ErrWrong},
		{"Bearer bet", ErrWrong},
		{"Bearer betaa", ErrWrong},
	}
	for _, tt := range tests {
		if err := tok.Check(tt.header); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("Check(%q) = %v, want %v", tt.header, err, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	secret := "s3cr3t token"
	tests := []struct{ name, data, want string }{
		{"empty", "", "no tokens"},
		{"comments only", "# a\n\n", "no tokens"},
		{"space inside", "ok\n" + secret + "\n", "line 2"},
		{"bad char", "to:ken\n", "line 1"},
		{"padding in middle", "ab=c\n", "line 1"},
		{"too long", strings.Repeat("a", MaxBytes+1), "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "to:ken") {
				t.Fatalf("error leaks the token: %v", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokens")
	if err := os.WriteFile(p, []byte("tok1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := Load(p)
	if err != nil || tok.Check("Bearer tok1") != nil {
		t.Fatalf("LoadTokens = %v, %v", tok, err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); !errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file err = %v", err)
	}
}
