package bus

import (
	"fmt"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
)

// Replica aliases. A replica id is opaque, but clients name replicas in several ways: Dynamo's
// Kubernetes endpoint picker registers peers as tcp://<pod-ip>:<sync-port>, an operator may
// write tcp://<hostname>:<port>, and kvselect's default id is the latter. So that a peer
// registered under any of these names is recognised as the same replica, each replica announces
// its aliases — the other ids a client may use for it (Config.Aliases; cmd/kvselect derives them
// from the hostname, the interface addresses, POD_IP and --replica-id, each with the sync port)
// — in its heartbeats (Heartbeat.Aliases, an additive key of the map-encoded body). A receiver
// then applies a sender's events when the sender's id or any alias it announced is a configured
// peer, and refuses to register its own aliases as peers.
//
// Aliases are learned from the live member table: until a sender's first heartbeat arrives (it
// sends one at startup) only its canonical id matches, and after it expires its aliases are
// forgotten until it is heard again.

// MaxAliases bounds the aliases a heartbeat may carry (decoders reject more).
const MaxAliases = 32

// normalizeAliases validates cfg.Aliases and rewrites them sorted, without duplicates and
// without the replica's own id.
func normalizeAliases(cfg *Config) error {
	out := make([]string, 0, len(cfg.Aliases))
	for _, a := range cfg.Aliases {
		if err := ValidateReplicaID(a); err != nil {
			return fmt.Errorf("%w: alias %q: %w", ErrConfig, a, err)
		}
		if a != cfg.ReplicaID {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxAliases {
		return fmt.Errorf("%w: %d aliases, at most %d", ErrConfig, len(out), MaxAliases)
	}
	cfg.Aliases = out
	return nil
}

// IsSelf reports whether id names this replica: its id or one of its aliases.
func (r *Replicator) IsSelf(id string) bool {
	_, found := slices.BinarySearch(r.cfg.Aliases, id)
	return id == r.cfg.ReplicaID || found
}

// Aliases returns this replica's aliases (sorted; the caller must not modify them).
func (r *Replicator) Aliases() []string { return r.cfg.Aliases }

// IsPeer reports whether events from replica id are applied: id, or an alias it announced, is
// a configured peer (or, with DiscoverPeers, it is live).
func (r *Replicator) IsPeer(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.isPeerLocked(id)
}

// aliasPeerLocked reports whether an alias the live member id announced is a configured peer.
// r.mu held.
func (r *Replicator) aliasPeerLocked(id string) bool {
	for _, a := range r.members.aliases[id] {
		if _, ok := r.peers[a]; ok {
			return true
		}
	}
	return false
}

// encodeAliases writes the heartbeat's alias key and array.
func encodeAliases(enc *msgpack.Encoder, aliases []string) error {
	if err := enc.EncodeString(hbKeyAliases); err != nil {
		return err
	}
	if err := enc.EncodeArrayLen(len(aliases)); err != nil {
		return err
	}
	for _, a := range aliases {
		if err := enc.EncodeString(a); err != nil {
			return err
		}
	}
	return nil
}

// decodeAliases reads the heartbeat's alias array into dst[:0]: at most MaxAliases valid
// replica ids, or an error.
func decodeAliases(d *Decoder, dst []string) ([]string, error) {
	n, err := d.arrayLen()
	if err != nil {
		return dst, err
	}
	if n > MaxAliases {
		return dst, fmt.Errorf("%d aliases, at most %d", n, MaxAliases)
	}
	dst = dst[:0]
	for range n {
		a, err := d.str()
		if err != nil {
			return dst, err
		}
		if err := ValidateReplicaID(a); err != nil {
			return dst, err
		}
		dst = append(dst, a)
	}
	return dst, nil
}

// setAliases records the aliases live member id announced (copied: the decoder reuses hb's
// slice). Called for every accepted heartbeat that keeps id live.
func (m *Members) setAliases(id string, aliases []string) {
	if len(aliases) == 0 {
		delete(m.aliases, id)
		return
	}
	if cur, ok := m.aliases[id]; ok && slices.Equal(cur, aliases) {
		return
	}
	if m.aliases == nil {
		m.aliases = make(map[string][]string)
	}
	m.aliases[id] = slices.Clone(aliases)
}

// MemberAliases returns the aliases live member id announced (nil when none or not live).
func (m *Members) MemberAliases(id string) []string { return m.aliases[id] }
