package aibrix

import (
	"errors"
	"testing"
)

// TestAppendEscape pins what each escape decodes to and, for malformed ones, which error is
// reported at which offset (the sjParser reports that offset in its sjSyntaxError).
func TestOracleAppendEscape(t *testing.T) {
	tests := []struct {
		in   string // the escape, backslash at offset 0, possibly followed by more text
		want string // decoded text, for valid escapes
		next int    // offset after the escape, or of the fault
		err  error
	}{
		{in: `\"x`, want: `"`, next: 2},
		{in: `\\`, want: `\`, next: 2},
		{in: `\/`, want: "/", next: 2},
		{in: `\b\f`, want: "\b", next: 2},
		{in: `\f`, want: "\f", next: 2},
		{in: `\n`, want: "\n", next: 2},
		{in: `\r`, want: "\r", next: 2},
		{in: `\t`, want: "\t", next: 2},
		{in: `\u00e9`, want: "é", next: 6},
		{in: `\u00E9z`, want: "é", next: 6},
		{in: `\ud83d\ude00`, want: "😀", next: 12},
		{in: `\`, next: 0, err: sjErrUnterminatedEscape},
		{in: `\x`, next: 1, err: sjErrBadEscapeChar},
		{in: `\u00g0`, next: 2, err: sjErrBadUnicodeEscape},
		{in: `\u00`, next: 2, err: sjErrBadUnicodeEscape},
		{in: `\ude00`, next: 6, err: sjErrUnpairedSurrogate},        // low surrogate first
		{in: `\ud83dx`, next: 6, err: sjErrUnpairedSurrogate},       // high surrogate alone
		{in: `\ud83d\u12`, next: 8, err: sjErrBadUnicodeEscape},     // truncated second escape
		{in: `\ud83d\u0041`, next: 12, err: sjErrUnpairedSurrogate}, // second is not a low surrogate
	}
	for _, tt := range tests {
		got, next, err := sjAppendEscape([]byte("p"), []byte(tt.in), 0)
		if !errors.Is(err, tt.err) || next != tt.next {
			t.Errorf("sjAppendEscape(%q) = next %d, err %v; want %d, %v", tt.in, next, err, tt.next, tt.err)
			continue
		}
		if tt.err == nil && string(got) != "p"+tt.want {
			t.Errorf("sjAppendEscape(%q) = %q, want %q", tt.in, got, "p"+tt.want)
		}
	}
}

// TestParseEscapeOffsets: the sjParser reports a malformed escape at the fault's offset in the
// document.
func TestOracleParseEscapeOffsets(t *testing.T) {
	for in, off := range map[string]int{`"ab\x"`: 4, `"\ud83d\u0041"`: 13, `"é\q"`: 4} {
		_, err := sjParse([]byte(in))
		var se *sjSyntaxError
		if !errors.As(err, &se) || se.Offset != off {
			t.Errorf("sjParse(%s) = %v, want a syntax error at offset %d", in, err, off)
		}
	}
}
