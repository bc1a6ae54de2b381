package kvhash

import "github.com/zeebo/xxh3"

// mmHexLen is the length of a vLLM multimodal identifier that is itself a
// hex-encoded SHA-256 digest.
const mmHexLen = 64

// MMHash maps a multimodal object identifier (as found in vLLM extra_keys or
// request mm info) to the u64 mixed into block hashes:
//
//   - exactly 64 hex digits (either case): the first 16 digits parsed as a
//     big-endian u64;
//   - anything else, including the empty string: XXH3-64 of its UTF-8 bytes
//     with seed 0.
//
// It never fails and never allocates.
func MMHash(identifier string) uint64 {
	if v, ok := ParseHexDigest(identifier); ok {
		return v
	}
	return xxh3.HashString(identifier)
}

// ParseHexDigest reports whether s is a 64-hex-digit digest and, if so,
// returns the value of its first 16 digits. Callers that must tell MM hashes
// apart from other extra keys (the KV-event decoder) use it directly.
func ParseHexDigest(s string) (uint64, bool) {
	if len(s) != mmHexLen {
		return 0, false
	}
	var v uint64
	for i := 0; i < mmHexLen; i++ {
		d, ok := hexVal(s[i])
		if !ok {
			return 0, false
		}
		if i < 16 {
			v = v<<4 | uint64(d)
		}
	}
	return v, true
}

// hexVal decodes one hex digit.
func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
