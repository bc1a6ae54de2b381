//go:build fault

package integration

import (
	"testing"
	"time"
)

// The full bus fault suite: go test -tags fault -run TestBusFault -v ./integration/
var busFaultFull = busFaultSizes{natsDown: 10 * time.Second, partition: 10 * time.Second, storm: 100_000}

func TestBusFaultNATSKilled(t *testing.T)           { needBinaries(t); faultNATSKilled(t, busFaultFull) }
func TestBusFaultReplicaKilled(t *testing.T)        { needBinaries(t); faultReplicaKilled(t, false) }
func TestBusFaultReplicaKilledRestart(t *testing.T) { needBinaries(t); faultReplicaKilled(t, true) }
func TestBusFaultPartition(t *testing.T)            { needBinaries(t); faultPartition(t, busFaultFull) }
func TestBusFaultForgedStorm(t *testing.T)          { needBinaries(t); faultForgedStorm(t, busFaultFull) }
