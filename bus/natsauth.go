package bus

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"go.yaml.in/yaml/v3"
)

// Bus authentication and authorisation for the embedded server.
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
// the server registers the user with [ReplicaPermissions]: it may publish only on its own v2
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

// nkeyFor returns the public nkey a replica id must use, if the file lists it.
func (a *AuthFile) nkeyFor(id string) (string, bool) {
	for _, r := range a.Replicas {
		if r.ID == id {
			return r.Nkey, true
		}
	}
	return "", false
}

// replicaForNkey returns the replica id of a public nkey.
func (a *AuthFile) replicaForNkey(pub string) (string, bool) {
	for _, r := range a.Replicas {
		if r.Nkey == pub {
			return r.ID, true
		}
	}
	return "", false
}

// responseTTL is how long a replica may answer a snapshot request it received (the first
// request of a transfer encodes the whole index, so it gets minutes, not seconds).
const responseTTL = 10 * time.Minute

// ReplicaPermissions are the NATS permissions of replica id in cluster:
//
//	publish:   kvselect.v2.<cluster>.*.<own token>     its lifecycle, affinity, members
//	           kvselect.v1.<cluster>.snapshot.*        snapshot requests to any replica
//	           (replies to requests it received: allow_responses, one per request, 10 min)
//	subscribe: kvselect.v2.<cluster>.>                 every replica's fan-out
//	           kvselect.v1.<cluster>.{lifecycle,affinity,members}  (counted, refused by default)
//	           kvselect.v1.<cluster>.snapshot.<own hash token>     its own snapshot requests
//	           _INBOX.>                                 replies to its requests
//
// Nothing else: no v1 fan-out publishing (v1 senders are unauthenticated), no other subjects.
func ReplicaPermissions(cluster, id string) (*server.Permissions, error) {
	s, err := NewSubjects(cluster)
	if err != nil {
		return nil, err
	}
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			s.PublishAllowV2(id),
			s.snapshot + "*",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{
			subjectPrefixV2 + cluster + ".>",
			s.Lifecycle(), s.Affinity(), s.Members(),
			s.Snapshot(id),
			"_INBOX.>",
		}},
		Response: &server.ResponsePermission{MaxMsgs: 1, Expires: responseTTL},
	}, nil
}

// Authenticator implements server.Authentication for the embedded server: it admits the
// replicas of an [AuthFile] and gives each the permissions of its own id.
type Authenticator struct {
	file    *AuthFile
	cluster string
}

var _ server.Authentication = (*Authenticator)(nil)

// NewAuthenticator validates cluster and returns the authenticator of file.
func NewAuthenticator(file *AuthFile, cluster string) (*Authenticator, error) {
	if file == nil {
		return nil, fmt.Errorf("%w: no auth file", ErrAuthFile)
	}
	if err := ValidateCluster(cluster); err != nil {
		return nil, err
	}
	return &Authenticator{file: file, cluster: cluster}, nil
}

// Check implements server.Authentication. Only client connections are admitted (no leaf
// nodes); routes are authenticated by the route user, not here.
func (a *Authenticator) Check(c server.ClientAuthentication) bool {
	if c.Kind() != server.CLIENT {
		return false
	}
	o := c.GetOpts()
	id, ok := a.identify(o, c.GetNonce())
	if !ok {
		return false
	}
	perms, err := ReplicaPermissions(a.cluster, id)
	if err != nil {
		return false
	}
	c.RegisterUser(&server.User{Username: id, Permissions: perms})
	return true
}

// identify returns the replica id a CONNECT proves: an nkey signature over the nonce, or the
// replica's shared-secret password (refused for replicas that must use an nkey).
func (a *Authenticator) identify(o *server.ClientOpts, nonce []byte) (string, bool) {
	if o.Nkey != "" {
		id, ok := a.file.replicaForNkey(o.Nkey)
		if !ok || len(nonce) == 0 {
			return "", false
		}
		sig, err := base64.RawURLEncoding.DecodeString(o.Sig)
		if err != nil {
			if sig, err = base64.StdEncoding.DecodeString(o.Sig); err != nil {
				return "", false
			}
		}
		kp, err := nkeys.FromPublicKey(o.Nkey)
		if err != nil || kp.Verify(nonce, sig) != nil {
			return "", false
		}
		return id, true
	}
	if a.file.Secret == "" || ValidateReplicaID(o.Username) != nil {
		return "", false
	}
	if _, mustNkey := a.file.nkeyFor(o.Username); mustNkey {
		return "", false
	}
	want := ReplicaPassword(a.file.Secret, o.Username)
	if !hmac.Equal([]byte(o.Password), []byte(want)) {
		return "", false
	}
	return o.Username, true
}

// RequiresNonce reports whether the server must send a nonce (nkey users exist).
func (a *Authenticator) RequiresNonce() bool { return len(a.file.Replicas) > 0 }
