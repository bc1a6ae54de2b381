package bus

import (
	"errors"
	"fmt"
	"strings"
)

// Subject layout v2: the sender's identity is in the subject.
//
//	kvselect.v2.<cluster>.lifecycle.<sender-token>   fan-out, Lifecycle/LiveSet/ResyncRequest envelopes
//	kvselect.v2.<cluster>.affinity.<sender-token>    fan-out, Affinity envelopes
//	kvselect.v2.<cluster>.members.<sender-token>     fan-out, Heartbeat envelopes
//
// Every replica publishes only on the three subjects ending in its own token, and subscribes to
// `kvselect.v2.<cluster>.<kind>.*`. A NATS server configured with per-user publish permissions
// (see natsauth.go, or README "Bus authentication") then enforces identity: nobody but replica X
// can publish on X's subjects. A receiver takes the sender from the subject and drops an
// envelope whose sender field names anyone else (counted as an impersonation). The envelopes
// themselves are unchanged (envelope version 1): v2 is a subject layout, not a new payload.
//
// The snapshot request/reply subject stays `kvselect.v1.<cluster>.snapshot.<hash-token>` (see
// subjects.go): requests may come from anyone authorised, only the addressed replica may
// subscribe to it.
//
// # Sender tokens
//
// [EncodeSenderToken] maps a replica id to one NATS subject token, reversibly and readably:
// the bytes A-Z, a-z, 0-9 and '-' are kept; every other byte b becomes '_' followed by two
// upper-case hex digits of b ('_' itself becomes "_5F"). So "tcp://selector-a:9092" becomes
// "tcp_3A_2F_2Fselector-a_3A9092". The alphabet excludes '.', '*', '>', whitespace and '$',
// so a token can never span or wildcard subject tokens, and the encoding is canonical (one
// token per id; lower-case hex or a kept byte written escaped are rejected by
// [DecodeSenderToken]), so comparing tokens compares ids. A 256-byte id gives at most a
// 768-byte token.

const subjectPrefixV2 = SubjectRoot + ".v2."

// ErrInvalidSenderToken is returned by DecodeSenderToken for a token that is not the canonical
// encoding of a valid replica id.
var ErrInvalidSenderToken = errors.New("bus: invalid sender token")

const hexUpper = "0123456789ABCDEF"

func isKeptByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// EncodeSenderToken returns the subject token of replica id (see the package comment above).
func EncodeSenderToken(id string) string {
	var b strings.Builder
	b.Grow(len(id) + len(id)/2)
	for i := 0; i < len(id); i++ {
		c := id[i]
		if isKeptByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hexUpper[c>>4])
		b.WriteByte(hexUpper[c&0xF])
	}
	return b.String()
}

// DecodeSenderToken inverts EncodeSenderToken. It accepts only canonical tokens of valid
// replica ids, so DecodeSenderToken(t) succeeding implies EncodeSenderToken(id) == t.
func DecodeSenderToken(tok string) (string, error) {
	if len(tok) == 0 || len(tok) > 3*maxReplicaIDLen {
		return "", fmt.Errorf("%w: length %d", ErrInvalidSenderToken, len(tok))
	}
	out := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if isKeptByte(c) {
			out = append(out, c)
			continue
		}
		if c != '_' || i+2 >= len(tok) {
			return "", fmt.Errorf("%w: byte %q at %d", ErrInvalidSenderToken, c, i)
		}
		hi, lo := unhexUpper(tok[i+1]), unhexUpper(tok[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("%w: bad escape at %d", ErrInvalidSenderToken, i)
		}
		v := byte(hi<<4 | lo)
		if isKeptByte(v) {
			return "", fmt.Errorf("%w: non-canonical escape at %d", ErrInvalidSenderToken, i)
		}
		out = append(out, v)
		i += 2
	}
	id := string(out)
	if err := ValidateReplicaID(id); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidSenderToken, err)
	}
	return id, nil
}

func unhexUpper(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// LifecycleFrom is the v2 lifecycle subject replica id publishes on.
func (s Subjects) LifecycleFrom(id string) string { return s.v2(kindLifecycle, id) }

// AffinityFrom is the v2 affinity subject replica id publishes on.
func (s Subjects) AffinityFrom(id string) string { return s.v2(kindAffinity, id) }

// MembersFrom is the v2 members (heartbeat) subject replica id publishes on.
func (s Subjects) MembersFrom(id string) string { return s.v2(kindMembers, id) }

// LifecycleAll, AffinityAll and MembersAll are the v2 wildcard subscriptions of one kind.
func (s Subjects) LifecycleAll() string { return s.v2Kind(kindLifecycle) + "*" }

// AffinityAll is the wildcard subscription of every replica's affinity subject.
func (s Subjects) AffinityAll() string { return s.v2Kind(kindAffinity) + "*" }

// MembersAll is the wildcard subscription of every replica's members subject.
func (s Subjects) MembersAll() string { return s.v2Kind(kindMembers) + "*" }

// PublishAllowV2 returns the subject pattern replica id must be allowed to publish on (and
// nobody else): "kvselect.v2.<cluster>.*.<token>".
func (s Subjects) PublishAllowV2(id string) string {
	return subjectPrefixV2 + s.cluster + ".*." + EncodeSenderToken(id)
}

// V2All matches every v2 subject of the cluster (what a replica subscribes to under permissions).
func (s Subjects) V2All() string { return subjectPrefixV2 + s.cluster + ".>" }

// SnapshotAny matches every replica's snapshot request subject.
func (s Subjects) SnapshotAny() string { return s.snapshot + "*" }

func (s Subjects) v2Kind(kind string) string { return subjectPrefixV2 + s.cluster + "." + kind + "." }

func (s Subjects) v2(kind, id string) string { return s.v2Kind(kind) + EncodeSenderToken(id) }

// SenderFromSubject returns the sender token of a v2 fan-out subject of this cluster and kind,
// or ok false when subject is not one. The token is not decoded: compare it with
// EncodeSenderToken of the claimed sender (cheaper, and equivalent because the encoding is
// canonical).
func (s Subjects) SenderFromSubject(subject, kind string) (token string, ok bool) {
	prefix := s.v2Kind(kind)
	if !strings.HasPrefix(subject, prefix) {
		return "", false
	}
	token = subject[len(prefix):]
	if token == "" || strings.IndexByte(token, '.') >= 0 {
		return "", false
	}
	return token, true
}
