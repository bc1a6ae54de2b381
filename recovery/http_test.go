package recovery

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestFetchHTTPOrder: peers are tried in order; unreachable, non-2xx, malformed and truncated
// peers are skipped (each failed attempt discarded from the sink) and the first good one wins.
func TestFetchHTTPOrder(t *testing.T) {
	good := genDump(2, 3, 4)
	var hits atomic.Int32
	serve := func(body string, status int) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			if r.URL.Path != "/dump" || r.Method != http.MethodGet {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
	}
	s500 := serve(`{}`, http.StatusInternalServerError)
	defer s500.Close()
	bad := serve(`{"m:g":{"block_size":4,"events":[{"worker_id":1,`, http.StatusOK) // truncated
	defer bad.Close()
	partial := serve(string(good[:len(good)-1]), http.StatusOK) // complete partitions, no final '}'
	defer partial.Close()
	ok := serve(string(good), http.StatusOK)
	defer ok.Close()
	after := serve(`{}`, http.StatusOK)
	defer after.Close()

	dead := deadURL(t)
	s := newRecSink(t)
	peers := []string{dead, s500.URL, bad.URL, partial.URL + "/", strings.TrimPrefix(ok.URL, "http://"), after.URL}
	res, err := FetchHTTP(context.Background(), peers, s, HTTPOptions{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("FetchHTTP: %v", err)
	}
	if res.Peer != peers[4] || res.Attempts != 5 || res.Source != "http" {
		t.Fatalf("result %+v", res)
	}
	if s.discards != 4 {
		t.Fatalf("%d discards, want 4 (one per failed peer)", s.discards)
	}
	if len(s.done) != 2 || s.blocks() != 2*3*4 || res.Stats.Blocks != 24 || res.Stats.Bytes != int64(len(good)) {
		t.Fatalf("sink has %d partitions %d blocks; stats %+v", len(s.done), s.blocks(), res.Stats)
	}
	if hits.Load() != 4 {
		t.Fatalf("%d requests served, want 4 (the peer after the winner is not asked)", hits.Load())
	}
}

// TestFetchHTTPNoPeer: all peers failing (or none configured) wraps ErrNoPeer and each cause.
func TestFetchHTTPNoPeer(t *testing.T) {
	s := newRecSink(t)
	_, err := FetchHTTP(context.Background(), nil, s, HTTPOptions{})
	if !errors.Is(err, ErrNoPeer) {
		t.Fatalf("no peers: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[]`))
	}))
	defer srv.Close()
	_, err = FetchHTTP(context.Background(), []string{srv.URL, deadURL(t)}, s, HTTPOptions{Timeout: time.Second})
	if !errors.Is(err, ErrNoPeer) || !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrPeer) {
		t.Fatalf("err %v should wrap ErrNoPeer, ErrPeer and ErrMalformed", err)
	}
}

// TestFetchHTTPTimeout: a peer that never finishes its body is abandoned after the per-peer
// timeout and the next peer is used.
func TestFetchHTTPTimeout(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"m:g":{"block_size":4,"events":[`))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{}`))
	}))
	defer ok.Close()
	s := newRecSink(t)
	res, err := FetchHTTP(context.Background(), []string{slow.URL, ok.URL}, s, HTTPOptions{Timeout: 200 * time.Millisecond})
	if err != nil || res.Peer != ok.URL || s.discards != 1 {
		t.Fatalf("res %+v err %v discards %d", res, err, s.discards)
	}
}

// TestDumpURL pins peer URL normalisation.
func TestDumpURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://a:1":       "http://a:1/dump",
		"http://a:1/":      "http://a:1/dump",
		"a:8090":           "http://a:8090/dump",
		"https://x/prefix": "https://x/prefix/dump",
	} {
		if got := DumpURL(in); got != want {
			t.Errorf("DumpURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// deadURL returns the URL of a loopback port nobody listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr
}
