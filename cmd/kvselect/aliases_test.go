package main

import (
	"fmt"
	"net"
	"reflect"
	"testing"

	"github.com/kvselect/kvselect/bus"
)

func ipNet(s string) net.Addr {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

// TestReplicaAliases: the names a client may use for this replica, with the sync port —
// POD_IP first (Dynamo's endpoint picker registers tcp://<pod-ip>:<sync-port>), the hostname,
// global interface addresses, loopback last; no link-local, no duplicates, not the id itself.
func TestReplicaAliases(t *testing.T) {
	addrs := []net.Addr{ipNet("127.0.0.1/8"), ipNet("10.1.2.3/24"), ipNet("fe80::1/64"), ipNet("fd00::7/64"), ipNet("::1/128")}
	got := replicaAliases("tcp://selector-a:9092", "selector-a", "10.1.2.3", 9092, addrs)
	want := []string{"tcp://10.1.2.3:9092", "tcp://[fd00::7]:9092", "tcp://127.0.0.1:9092", "tcp://[::1]:9092"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("aliases %v, want %v", got, want)
	}
	// With --replica-id, the default id form becomes an alias too.
	got = replicaAliases("a", "selector-a", "", 9092, nil)
	if want := []string{"tcp://selector-a:9092"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("aliases %v, want %v", got, want)
	}
	// A malformed POD_IP is ignored; a host with many addresses is capped.
	var many []net.Addr
	for i := range 2 * bus.MaxAliases {
		many = append(many, ipNet(fmt.Sprintf("10.9.%d.1/16", i)))
	}
	if got := replicaAliases("a", "", "not-an-ip", 1, many); len(got) != bus.MaxAliases {
		t.Fatalf("%d aliases, want the cap %d", len(got), bus.MaxAliases)
	}
}

func TestSyncPort(t *testing.T) {
	o := &options{port: 8092}
	if o.syncPort() != 8092 {
		t.Fatal("without --replica-sync-port the HTTP port")
	}
	o.replicaSyncPort = 9092
	if o.syncPort() != 9092 {
		t.Fatal("with --replica-sync-port that port")
	}
}
