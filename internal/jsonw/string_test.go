package jsonw

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// seeds cover each escaping class encoding/json distinguishes, alone and next to each other.
var seeds = []string{
	"", "default", "http://worker-1:8000", `q"uote`, `back\slash`, "<tag>&amp;", "line\nfeed\r\t\b\f",
	"\x00\x01\x1f\x7f", "é日本😀", "\u2028\u2029", "\xff\xfe", "a\xc3", "\xed\xa0\x80", "/slash",
	"\u2028<\xff\"\x00é",
}

// TestAppendStringMatchesStdlib checks the seeds byte for byte against encoding/json and that the
// result always decodes back (to s, when s is valid UTF-8).
func TestAppendStringMatchesStdlib(t *testing.T) {
	for _, s := range seeds {
		checkString(t, s)
	}
}

// TestAppendStringAppends checks that the literal is appended after existing bytes, not over them.
func TestAppendStringAppends(t *testing.T) {
	got := AppendString([]byte("x:"), "a<b")
	if want := `x:"a\u003cb"`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// FuzzAppendString checks AppendString against encoding/json on arbitrary strings.
func FuzzAppendString(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(checkString)
}

func checkString(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got := AppendString(nil, s)
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
	}
	if !utf8.Valid(got) || bytes.ContainsAny(got, "<>&") {
		t.Fatalf("AppendString(%q) = %q: invalid UTF-8 or unescaped HTML characters", s, got)
	}
	var back string
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("AppendString(%q) = %s does not decode: %v", s, got, err)
	}
	if utf8.ValidString(s) && back != s {
		t.Fatalf("AppendString(%q) decodes to %q", s, back)
	}
}

// BenchmarkAppendString measures the common case: a plain ASCII endpoint URL.
func BenchmarkAppendString(b *testing.B) {
	s := "http://worker-" + strings.Repeat("7", 3) + ".pool.svc.cluster.local:8000"
	buf := make([]byte, 0, 128)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}
