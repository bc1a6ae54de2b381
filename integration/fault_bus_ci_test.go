package integration

import (
	"testing"
	"time"
)

// The CI-size subset of the bus fault suite (fault_bus_test.go), in the normal suite: a dead
// replica released, a black hole healed, and a forged storm on an authenticated bus, each with
// a small size. The full suite: go test -tags fault -run TestBusFault -v ./integration/
var busFaultCI = busFaultSizes{natsDown: 2 * time.Second, partition: 4 * time.Second, storm: 10_000}

func TestBusFaultCI(t *testing.T) {
	needBinaries(t)
	t.Run("replica-kill9", func(t *testing.T) { faultReplicaKilled(t, false) })
	t.Run("tcp-blackhole", func(t *testing.T) { faultPartition(t, busFaultCI) })
	t.Run("forged-storm", func(t *testing.T) { faultForgedStorm(t, busFaultCI) })
}
