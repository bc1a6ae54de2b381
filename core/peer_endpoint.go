package core

import (
	"strings"

	"github.com/kvselect/kvselect/core/engine"
)

// ValidatePeerEndpoint checks a replica-sync peer id as POST /replica_sync/register_peer and
// --replica-sync-peers receive it. An id written as an endpoint (it has a "scheme://") must be a
// valid ZMQ endpoint, as Dynamo requires of its peers; the error is Dynamo's
// ("invalid ZMQ endpoint `tcp://x`: missing TCP port"). A bare id without a scheme ("a",
// "selector-b") is a kvselect replica id on the bus and is accepted (README, differences from
// Dynamo).
func ValidatePeerEndpoint(id string) error {
	if !strings.Contains(id, "://") {
		return nil
	}
	return engine.ValidateZMQEndpoint(id)
}
