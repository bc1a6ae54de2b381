package api_test

import (
	"net/http"
	"testing"

	"github.com/kvselect/kvselect/core"
)

// TestReplicaSyncRejectsMalformedPeerEndpoints: a peer written as an endpoint must be a valid
// ZMQ endpoint (Dynamo's validate_endpoint, its message verbatim) for both peer routes, and a
// rejected one changes nothing; a bare kvselect replica id (no scheme) is still accepted.
func TestReplicaSyncRejectsMalformedPeerEndpoints(t *testing.T) {
	h := newHarnessWith(t, setup{opts: []core.Option{core.WithReplicator(&fakeReplicator{peers: map[string]bool{}})}})
	cases := map[string]string{
		"tcp://selector-b":       "invalid ZMQ endpoint `tcp://selector-b`: missing TCP port",
		"tcp://:9092":            "invalid ZMQ endpoint `tcp://:9092`: missing TCP host",
		"tcp://selector-b:http":  "invalid ZMQ endpoint `tcp://selector-b:http`: invalid TCP port: invalid digit found in string",
		"tcp://selector-b:70000": "invalid ZMQ endpoint `tcp://selector-b:70000`: invalid TCP port: number too large to fit in target type",
		"http://selector-b:9092": "invalid ZMQ endpoint `http://selector-b:9092`: unsupported scheme `http`",
		"tcp://[::1:9092":        "invalid ZMQ endpoint `tcp://[::1:9092`: missing closing ]",
		"tcp://fe80::1:9092":     "invalid ZMQ endpoint `tcp://fe80::1:9092`: missing TCP port",
		"://selector-b:9092":     "invalid ZMQ endpoint `://selector-b:9092`: missing scheme",
		"tcp://":                 "invalid ZMQ endpoint `tcp://`: missing address",
	}
	for ep, msg := range cases {
		for _, path := range []string{"/replica_sync/register_peer", "/replica_sync/deregister_peer"} {
			got := string(h.must(http.StatusBadRequest, "POST", path, `{"endpoint":"`+ep+`"}`))
			if want := `{"error":"` + msg + `"}`; got != want {
				t.Errorf("%s %q = %s, want %s", path, ep, got, want)
			}
		}
	}
	if got := string(h.must(http.StatusOK, "GET", "/replica_sync/peers", "")); got != "[]" {
		t.Fatalf("rejected endpoints were registered: %s", got)
	}
	for _, ep := range []string{"tcp://10.0.0.7:9092", "tcp://[::1]:9092", "tcp://*:9092", "ipc:///tmp/sync", "selector-b"} {
		h.must(http.StatusCreated, "POST", "/replica_sync/register_peer", `{"endpoint":"`+ep+`"}`)
	}
}
