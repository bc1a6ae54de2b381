package natsembed

import (
	"crypto/hmac"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/kvselect/kvselect/bus"
)

// The server side of bus authentication (bus/natsauth.go describes the auth file and the trust
// model): the authenticator that admits the file's replicas and the permissions each gets.

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
	s, err := bus.NewSubjects(cluster)
	if err != nil {
		return nil, err
	}
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			s.PublishAllowV2(id),
			s.SnapshotAny(),
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{
			s.V2All(),
			s.Lifecycle(), s.Affinity(), s.Members(),
			s.Snapshot(id),
			"_INBOX.>",
		}},
		Response: &server.ResponsePermission{MaxMsgs: 1, Expires: responseTTL},
	}, nil
}

// Authenticator implements server.Authentication for the embedded server: it admits the
// replicas of a [bus.AuthFile] and gives each the permissions of its own id.
type Authenticator struct {
	file    *bus.AuthFile
	cluster string
}

var _ server.Authentication = (*Authenticator)(nil)

// NewAuthenticator validates cluster and returns the authenticator of file.
func NewAuthenticator(file *bus.AuthFile, cluster string) (*Authenticator, error) {
	if file == nil {
		return nil, fmt.Errorf("%w: no auth file", bus.ErrAuthFile)
	}
	if err := bus.ValidateCluster(cluster); err != nil {
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
		id, ok := a.replicaForNkey(o.Nkey)
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
	if a.file.Secret == "" || bus.ValidateReplicaID(o.Username) != nil {
		return "", false
	}
	if a.mustUseNkey(o.Username) {
		return "", false
	}
	want := bus.ReplicaPassword(a.file.Secret, o.Username)
	if !hmac.Equal([]byte(o.Password), []byte(want)) {
		return "", false
	}
	return o.Username, true
}

// RequiresNonce reports whether the server must send a nonce (nkey users exist).
func (a *Authenticator) RequiresNonce() bool { return len(a.file.Replicas) > 0 }

// mustUseNkey reports whether the file lists replica id with an nkey (no password login).
func (a *Authenticator) mustUseNkey(id string) bool {
	for _, r := range a.file.Replicas {
		if r.ID == id {
			return true
		}
	}
	return false
}

// replicaForNkey returns the replica id of a public nkey.
func (a *Authenticator) replicaForNkey(pub string) (string, bool) {
	for _, r := range a.file.Replicas {
		if r.Nkey == pub {
			return r.ID, true
		}
	}
	return "", false
}
