package aibrix

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
	// ErrInvalidTokens wraps every token-file problem. Messages name the
	// file and line, never the token text.
	ErrInvalidTokens = errors.New("invalid bearer token file")
	// ErrMissingToken: the request carries no bearer credentials.
	ErrMissingToken = errors.New("missing bearer token")
	// ErrWrongToken: the request's bearer token is not accepted.
	ErrWrongToken = errors.New("invalid bearer token")
)

// MaxTokenBytes bounds one token (the Gateway's own token-file limit).
const MaxTokenBytes = 8192

// Tokens is a set of accepted bearer tokens. Only SHA-256 digests are kept,
// so the tokens themselves cannot leak through the value (or a heap dump of
// a formatted struct), and checks compare fixed-length digests in constant
// time against every entry. Immutable after construction; safe for
// concurrent use.
type Tokens struct {
	digests [][sha256.Size]byte
}

// LoadTokens reads bearer tokens from path: one token per line, surrounding
// whitespace trimmed, blank lines and lines starting with '#' ignored. Each
// token must be an RFC 6750 b64token of at most MaxTokenBytes bytes, and the
// file must hold at least one.
func LoadTokens(path string) (*Tokens, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTokens, err)
	}
	t, err := ParseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTokens is [LoadTokens] on in-memory file contents.
func ParseTokens(data []byte) (*Tokens, error) {
	t := &Tokens{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxTokenBytes+1024)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if len(s) > MaxTokenBytes {
			return nil, fmt.Errorf("%w: line %d: token longer than %d bytes", ErrInvalidTokens, line, MaxTokenBytes)
		}
		if !isB64Token(s) {
			return nil, fmt.Errorf("%w: line %d: token has characters outside the RFC 6750 token alphabet", ErrInvalidTokens, line)
		}
		t.digests = append(t.digests, sha256.Sum256([]byte(s)))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: line %d: %w", ErrInvalidTokens, line+1, err)
	}
	if len(t.digests) == 0 {
		return nil, fmt.Errorf("%w: no tokens (only blank lines or comments)", ErrInvalidTokens)
	}
	return t, nil
}

// Len returns the number of accepted tokens.
func (t *Tokens) Len() int { return len(t.digests) }

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
// ErrMissingToken (no header, or not the Bearer scheme) or ErrWrongToken.
// Every accepted token is compared, so timing does not reveal which entry
// (if any) matched.
func (t *Tokens) Check(authorization string) error {
	const scheme = "bearer "
	if len(authorization) < len(scheme) || !strings.EqualFold(authorization[:len(scheme)], scheme) {
		return ErrMissingToken
	}
	tok := strings.TrimSpace(authorization[len(scheme):])
	if tok == "" {
		return ErrMissingToken
	}
	d := sha256.Sum256([]byte(tok))
	match := 0
	for i := range t.digests {
		match |= subtle.ConstantTimeCompare(d[:], t.digests[i][:])
	}
	if match != 1 {
		return ErrWrongToken
	}
	return nil
}
