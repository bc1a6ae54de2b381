package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/kvselect/kvselect/core/engine"
)

// maxAffinityTTLSecs is Dynamo's MAX_SESSION_AFFINITY_TTL_SECS.
const maxAffinityTTLSecs = 31_536_000

// parseAffinityTTL reads --session-affinity-ttl-secs: whole seconds in 1..31,536,000, as
// Dynamo's integer flag. Leaving the flag out turns affinity off.
func parseAffinityTTL(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("must be a whole number of seconds, got %q", v)
	}
	if n < 1 || n > maxAffinityTTLSecs {
		return 0, fmt.Errorf("session affinity TTL must be between 1 and %d seconds", maxAffinityTTLSecs)
	}
	return n, nil
}

// checkDynamoRules applies the rules Dynamo's CLI enforces on the flags kvselect shares with it
// (spec §1.1); the peer endpoints' form is core.Config.Validate's. Where kvselect keeps a different rule on purpose, the README's differences
// section says so: --replica-sync-peers is also accepted with --replica-id (kvselect's own sync
// identity), and a peer may be a bare replica id rather than a ZMQ endpoint.
func (o *options) checkDynamoRules(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.port < 1 || o.port > 65535 {
		return fmt.Errorf("--port must be between 1 and 65535")
	}
	if set["replica-sync-port"] && (o.replicaSyncPort < 1 || o.replicaSyncPort > 65535) {
		return fmt.Errorf("--replica-sync-port must be between 1 and 65535")
	}
	peers := splitList(o.replicaSyncPeers)
	if len(peers) > 0 && !set["replica-sync-port"] && o.replicaID == "" {
		return fmt.Errorf("--replica-sync-peers requires --replica-sync-port (or kvselect's --replica-id)")
	}
	if err := engine.ParseSessionAffinityMode(o.sessionAffinityMode); err != nil {
		if !set["session-affinity-mode"] {
			return fmt.Errorf("DYN_ROUTER_SESSION_AFFINITY_MODE: %w", err)
		}
		return fmt.Errorf("--session-affinity-mode: %w", err)
	}
	return nil
}
