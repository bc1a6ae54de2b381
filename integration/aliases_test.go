package integration

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
)

// TestClusterPeerRegisteredByPodIP replays how Dynamo's endpoint picker wires a fleet: it
// registers each selector as tcp://<pod-ip>:<sync-port>. Replica A runs with the default
// replica id (tcp://<hostname>:<sync-port>) and POD_IP set, as in a pod; B registers A by
// tcp://<POD_IP>:<sync-port> over HTTP. A's bookings must then show in B's /loads (before
// replica aliases B's /loads stayed 0: every event of A came from a non-peer id).
func TestClusterPeerRegisteredByPodIP(t *testing.T) {
	needBinaries(t)
	ns := startNATS(t, 0)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	const podIP = "10.77.0.9"
	syncPort := freePort(t)
	a := &replica{port: freePort(t), id: fmt.Sprintf("tcp://%s:%d", host, syncPort)}
	a.base = "http://127.0.0.1:" + strconv.Itoa(a.port)
	a.args = []string{"--host", "127.0.0.1", "--port", strconv.Itoa(a.port), "--replica-sync-port", strconv.Itoa(syncPort),
		"--cluster", "it", "--log-level", "debug", "--nats-url", ns.url()}
	a.p = startProc(t, "kvselect:a", kvselectBin, []string{"DYN_ROUTER_USE_KV_EVENTS=false", "POD_IP=" + podIP}, a.args...)
	waitFor(t, syncTimeout, func() error {
		_, err := a.call("GET", "/replica_sync/peers", nil, nil)
		return err
	})
	b := startReplica(t, "b", "--nats-url", ns.url())
	for _, r := range []*replica{a, b} {
		registerCatalog(t, r)
	}
	byIP := fmt.Sprintf("tcp://%s:%d", podIP, syncPort)
	b.must(t, http.StatusCreated, "POST", "/replica_sync/register_peer", map[string]any{"endpoint": byIP}, nil)
	// A refuses its own pod-IP name as a peer.
	if code, _ := a.call("POST", "/replica_sync/register_peer", map[string]any{"endpoint": byIP}, nil); code != http.StatusBadRequest {
		t.Fatalf("A registering its own alias: %d, want 400", code)
	}
	// Once B has heard A's heartbeat (and with it A's aliases), A's bookings reach B.
	waitMembers(t, b, a.id)
	book(t, a, "r1", 1)
	book(t, a, "r2", 2)
	waitSameLoads(t, 2, a, b)
}
