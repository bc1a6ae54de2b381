package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kvselect/kvselect/integration/mockworker"
)

// TestRunServesAndStops starts the command on random loopback ports, serves one completion
// over HTTP, checks the flags reached the worker, and stops it by cancelling the context.
func TestRunServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type up struct {
		addr string
		w    *mockworker.Worker
	}
	upc := make(chan up, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--http", "127.0.0.1:0", "--kv-events", "tcp://127.0.0.1:0", "--replay", "tcp://127.0.0.1:0",
			"--block-size", "8", "--num-gpu-blocks", "32", "--speedup", "1000", "--dp-size", "2", "--log-level", "warn",
		}, io.Discard, func(addr string, w *mockworker.Worker) { upc <- up{addr, w} })
	}()
	var u up
	select {
	case u = <-upc:
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("worker did not come up")
	}
	cfg := u.w.Config()
	if cfg.BlockSize != 8 || cfg.NumGPUBlocks != 32 || cfg.Speedup != 1000 || len(u.w.Endpoints()) != 2 {
		t.Fatalf("flags not applied: %+v", cfg)
	}
	resp, err := http.Post("http://"+u.addr+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt_token_ids":[1,2,3,4,5,6,7,8,9],"max_tokens":2,"dp_rank":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var r mockworker.Result
	err = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || r.DPRank != 1 || r.PromptTokens != 9 {
		t.Fatalf("completion: %d %+v %v", resp.StatusCode, r, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("run did not stop")
	}
}

// TestParseFlagsRejects covers flag errors.
func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--block-size", "0"}, {"--dp-size", "-1"}, {"--speedup", "x"}, {"extra"}, {"--nope"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	if err := run(context.Background(), []string{"--log-level", "loud"}, io.Discard, nil); err == nil {
		t.Error("bad log level accepted")
	}
	if err := run(context.Background(), []string{"--kv-events", "udp://x:1"}, io.Discard, nil); err == nil {
		t.Error("bad endpoint accepted")
	}
	if err := run(context.Background(), []string{"--model", "nope", "--kv-events", "tcp://127.0.0.1:0", "--replay", "", "--http", "127.0.0.1:0"}, io.Discard, nil); err == nil {
		t.Error("unknown model accepted")
	}
	if o, err := parseFlags([]string{"--model", "h100-8b"}, io.Discard); err != nil || o.cfg.Model != "h100-8b" {
		t.Errorf("--model h100-8b: %v %+v", err, o.cfg.Model)
	}
}
