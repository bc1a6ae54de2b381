package bus

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Subject layout. Every subject kvselect uses is built in this file and
// nowhere else, so the wire namespace can be read in one place.
//
//	kvselect.v1.<cluster>.lifecycle               fan-out, Lifecycle envelopes
//	kvselect.v1.<cluster>.affinity                fan-out, Affinity envelopes
//	kvselect.v1.<cluster>.members                 fan-out, Heartbeat envelopes
//	kvselect.v1.<cluster>.snapshot.<replica-token> request/reply, addressed to one replica
//	kvselect.v1.<cluster>.snapshot.probe           request/reply, answered by any replica that serves snapshots
//
// Model names, routing groups and replica ids never appear raw in a subject:
// they are free-form strings that may contain '.', '*', '>' or whitespace.
// Where a subject must address one replica, [ReplicaToken] derives a fixed
// shape token from the id by hashing it.
const (
	// SubjectRoot is the first token of every kvselect subject.
	SubjectRoot = "kvselect"
	// WireVersion is the subject version token and the envelope version this
	// build writes. Readers accept any envelope version >= 1 (see envelope.go).
	WireVersion = 1

	subjectPrefix = SubjectRoot + ".v1."

	kindLifecycle = "lifecycle"
	kindAffinity  = "affinity"
	kindMembers   = "members"
	kindSnapshot  = "snapshot"
	// snapshotProbeToken is the last token of the probe subject; it cannot collide with a
	// replica token (always 16 hex digits).
	snapshotProbeToken = "probe"

	// maxClusterLen bounds the cluster token; NATS itself has no small limit
	// but subjects are copied into every message, so they stay short.
	maxClusterLen = 64
	// replicaTokenBytes is how many bytes of SHA-256 go into a replica token
	// (hex encoded, so the token is twice as long). 64 bits make accidental
	// collisions between replicas of one cluster practically impossible.
	replicaTokenBytes = 8
)

// ErrInvalidCluster is returned for a cluster name that is not a single safe
// NATS subject token.
var ErrInvalidCluster = errors.New("bus: invalid cluster name")

// ErrInvalidReplicaID is returned for an empty or oversized replica id.
var ErrInvalidReplicaID = errors.New("bus: invalid replica id")

// maxReplicaIDLen bounds replica ids; they travel in every envelope.
const maxReplicaIDLen = 256

// ValidateCluster reports whether name can be used as the cluster token:
// 1 to 64 characters from [A-Za-z0-9_-]. The restriction is stricter than
// NATS requires on purpose: it excludes the separator '.', the wildcards
// '*' and '>', whitespace and the reserved '$' prefix.
func ValidateCluster(name string) error {
	if len(name) == 0 || len(name) > maxClusterLen {
		return fmt.Errorf("%w: %q: length must be 1..%d", ErrInvalidCluster, name, maxClusterLen)
	}
	for i := 0; i < len(name); i++ {
		if !isTokenByte(name[i]) {
			return fmt.Errorf("%w: %q: character %q not in [A-Za-z0-9_-]", ErrInvalidCluster, name, name[i])
		}
	}
	return nil
}

// ValidateReplicaID reports whether id is usable as a replica identity:
// non-empty, at most 256 bytes. Any other content is allowed (ids are
// opaque; Dynamo-style "tcp://host:port" strings are typical).
func ValidateReplicaID(id string) error {
	if len(id) == 0 || len(id) > maxReplicaIDLen {
		return fmt.Errorf("%w: length %d not in 1..%d", ErrInvalidReplicaID, len(id), maxReplicaIDLen)
	}
	return nil
}

func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// ReplicaToken derives the subject token that addresses replica id: the
// first 8 bytes of SHA-256(id), lower-case hex (16 characters). It is
// deterministic across processes and builds, so any replica can address any
// other knowing only its id.
func ReplicaToken(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:replicaTokenBytes])
}

// Subjects holds the subjects of one cluster. The zero value is unusable;
// build it with [NewSubjects]. It is immutable and safe to share.
type Subjects struct {
	cluster   string
	lifecycle string
	affinity  string
	members   string
	snapshot  string // prefix, ends in '.'
}

// NewSubjects validates cluster and precomputes its subjects.
func NewSubjects(cluster string) (Subjects, error) {
	if err := ValidateCluster(cluster); err != nil {
		return Subjects{}, err
	}
	base := subjectPrefix + cluster + "."
	return Subjects{
		cluster:   cluster,
		lifecycle: base + kindLifecycle,
		affinity:  base + kindAffinity,
		members:   base + kindMembers,
		snapshot:  base + kindSnapshot + ".",
	}, nil
}

// Cluster returns the cluster token.
func (s Subjects) Cluster() string { return s.cluster }

// Lifecycle is the fan-out subject for [Lifecycle] envelopes.
func (s Subjects) Lifecycle() string { return s.lifecycle }

// Affinity is the fan-out subject for [Affinity] envelopes.
func (s Subjects) Affinity() string { return s.affinity }

// Members is the fan-out subject for [Heartbeat] envelopes (beats and leaves).
func (s Subjects) Members() string { return s.members }

// Snapshot is the request/reply subject on which replica id answers snapshot
// requests. The snapshot protocol itself is not defined yet; this is the
// seam it will hang from (see [Replicator.ServeSnapshot]).
func (s Subjects) Snapshot(replicaID string) string {
	return s.snapshot + ReplicaToken(replicaID)
}

// SnapshotProbe is the request/reply subject every replica that serves snapshots also answers
// (with its replica id; see [Replicator.ServeSnapshotProbe]), so that a replica recovering at
// startup finds a live source at once instead of waiting for a heartbeat.
func (s Subjects) SnapshotProbe() string { return s.snapshot + snapshotProbeToken }
