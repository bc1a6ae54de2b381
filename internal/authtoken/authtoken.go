// Package authtoken is a set of accepted bearer tokens read from a token file: the one shape
// both the Dynamo API (http/api --auth-token-file) and the AIBrix endpoint
// (--aibrix-auth-token-file) use, so neither HTTP package imports the other.
package authtoken

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Authentication errors.
var (
	// ErrInvalid wraps every token-file problem. Messages name the
	// file and line, never the token text.
	ErrInvalid = errors.New("invalid bearer token file")
	// ErrMissing: the request carries no bearer credentials.
	ErrMissing = errors.New("missing bearer token")
	// ErrWrong: the request's bearer token is not accepted.
	ErrWrong = errors.New("invalid bearer token")
)

// MaxBytes bounds one token (the Gateway's own token-file limit).
const MaxBytes = 8192

// Set is a set of accepted bearer tokens. Only SHA-256 digests are kept,
// so the tokens themselves cannot leak through the value (or a heap dump of
// a formatted struct), and checks compare fixed-length digests in constant
// time against every entry. Immutable after construction; safe for
// concurrent use.
type Set struct {
	digests [][sha256.Size]byte
}

// Load reads bearer tokens from path: one token per line, surrounding whitespace trimmed, blank
// lines and lines starting with '#' ignored. Each token must be an RFC 6750 b64token of at most
// MaxBytes bytes, and the file must hold at least one.
func Load(path string) (*Set, error) {
	_, t, err := Read(path)
	return t, err
}

// Read is [Load] that also returns the bytes read (nil when the file could not be read), so a
// reloader can tell an unchanged file from a changed one.
func Read(path string) ([]byte, *Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	t, err := Parse(data)
	if err != nil {
		return data, nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, t, nil
}

// Parse is [Load] on in-memory file contents.
func Parse(data []byte) (*Set, error) {
	t := &Set{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxBytes+1024)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if len(s) > MaxBytes {
			return nil, fmt.Errorf("%w: line %d: token longer than %d bytes", ErrInvalid, line, MaxBytes)
		}
		if !isB64Token(s) {
			return nil, fmt.Errorf("%w: line %d: token has characters outside the RFC 6750 token alphabet", ErrInvalid, line)
		}
		t.digests = append(t.digests, sha256.Sum256([]byte(s)))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %w", ErrInvalid, line+1, err)
	}
	if len(t.digests) == 0 {
		return nil, fmt.Errorf("%w: no tokens (only blank lines or comments)", ErrInvalid)
	}
	return t, nil
}

// Len returns the number of accepted tokens.
func (t *Set) Len() int { return len(t.digests) }

// isB64Token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// Check validates an Authorization header value. It returns nil,
// ErrMissing (no header, or not the Bearer scheme) or ErrWrong.
// Every accepted token is compared, so timing does not reveal which entry
// (if any) matched.
func (t *Set) Check(authorization string) error {
	const scheme = "bearer "
	if len(authorization) < len(scheme) || !strings.EqualFold(authorization[:len(scheme)], scheme) {
		return ErrMissing
	}
	tok := strings.TrimSpace(authorization[len(scheme):])
	if tok == "" {
		return ErrMissing
	}
	d := sha256.Sum256([]byte(tok))
	match := 0
	for i := range t.digests {
		match |= subtle.ConstantTimeCompare(d[:], t.digests[i][:])
	}
	if match != 1 {
		return ErrWrong
	}
	return nil
}
