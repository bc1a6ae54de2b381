package bus

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nkeys"
	"go.yaml.in/yaml/v3"
)

// Bus authentication: the auth file shared by the embedded server (bus/natsembed enforces it)
// and its replicas (which derive their credentials from it).
//
// The auth file (--nats-auth-file, YAML or JSON) names who may connect:
//
//	secret: "at least 32 characters"   # shared secret (optional with nkeys, required for routes)
//	replicas:                          # optional: replicas that must use an nkey
//	  - id: tcp://kvselect-0.kvselect-peers:9092
//	    nkey: UD...                    # public user nkey; the replica holds the seed (--nats-nkey-seed)
//
// A replica connects as NATS user <replica id>. With the shared secret its password is
// [ReplicaPassword](secret, id), an HMAC that every server can check without a user list; a
// replica listed under replicas must instead sign the server's nonce with its nkey. Either way
// the server registers the user with natsembed.ReplicaPermissions: it may publish only on its own v2
// subjects (and snapshot requests and replies), so the identity a receiver reads from the
// subject is enforced by the server. Clients the file does not admit are refused at CONNECT:
// they can neither publish nor subscribe.
//
// Trust: whoever holds the shared secret can derive every replica's password, so the secret
// keeps unauthorised clients out but does not stop a compromised replica impersonating another;
// per-replica nkeys do (each replica holds only its own seed). In an embedded NATS cluster every
// replica is also a NATS server, and routes authenticate with a route password derived from the
// secret: a replica that holds it can join as a server, which bypasses client permissions. For
// protection against a compromised replica use an external NATS with per-replica nkeys or
// decentralised JWT accounts (README "Bus authentication").

// AuthFile is the parsed --nats-auth-file.
type AuthFile struct {
	Secret   string        `yaml:"secret" json:"secret"`
	Replicas []AuthReplica `yaml:"replicas" json:"replicas"`
}

// AuthReplica admits one replica id by its public nkey.
type AuthReplica struct {
	ID   string `yaml:"id" json:"id"`
	Nkey string `yaml:"nkey" json:"nkey"`
}

// ErrAuthFile is returned for an unreadable or invalid auth file.
var ErrAuthFile = errors.New("bus: invalid NATS auth file")

// minSecretLen is the shortest shared secret accepted.
const minSecretLen = 32

// LoadAuthFile reads and validates an auth file.
func LoadAuthFile(path string) (*AuthFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAuthFile, err)
	}
	return ParseAuthFile(b)
}

// ParseAuthFile parses YAML or JSON auth-file bytes and validates them: a secret of at least 32
// characters and/or a replica list of distinct valid ids with valid public user nkeys.
func ParseAuthFile(b []byte) (*AuthFile, error) {
	var a AuthFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrAuthFile, err)
	}
	a.Secret = strings.TrimSpace(a.Secret)
	if a.Secret != "" && len(a.Secret) < minSecretLen {
		return nil, fmt.Errorf("%w: secret has %d characters, need at least %d", ErrAuthFile, len(a.Secret), minSecretLen)
	}
	if a.Secret == "" && len(a.Replicas) == 0 {
		return nil, fmt.Errorf("%w: neither a secret nor replicas", ErrAuthFile)
	}
	seen := map[string]bool{}
	for i, r := range a.Replicas {
		if err := ValidateReplicaID(r.ID); err != nil {
			return nil, fmt.Errorf("%w: replicas[%d]: %w", ErrAuthFile, i, err)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("%w: replica %q listed twice", ErrAuthFile, r.ID)
		}
		seen[r.ID] = true
		if !nkeys.IsValidPublicUserKey(r.Nkey) {
			return nil, fmt.Errorf("%w: replicas[%d] (%s): nkey is not a public user nkey", ErrAuthFile, i, r.ID)
		}
	}
	return &a, nil
}

// ReplicaPassword is the NATS password of replica id under the shared secret.
func ReplicaPassword(secret, id string) string {
	return derive(secret, "replica\x00"+id)
}

// RouteUser and RoutePassword authenticate the routes of an embedded NATS cluster.
const RouteUser = "kvselect-route"

// RoutePassword is the route password under the shared secret.
func RoutePassword(secret string) string { return derive(secret, "route") }

func derive(secret, what string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("kvselect/nats/v1\x00" + what))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
