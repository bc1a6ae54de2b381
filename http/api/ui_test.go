package api_test

// The status page end to end in headless Chromium (Debian's chromium, driven over the DevTools
// protocol by chromedp): workers registered and load booked through the HTTP API appear on the
// page, and a worker registered later appears without a reload (the page refreshes itself).
// The test saves a screenshot and prints its path; with -update it also refreshes the one
// committed under docs/:
//
//	go test ./http/api -run TestStatusPageInChromium -v -update
//
// It skips when chromium is missing, except under CI=true, where a missing browser fails.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/api"
)

const uiScreenshot = "../../docs/status-page.png"

func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (CI=true): .ci/run must apt-get install -y chromium")
	}
	t.Skip("chromium is not installed; apt-get install -y chromium to run the status-page test")
	return ""
}

func TestStatusPageInChromium(t *testing.T) {
	chromium := chromiumPath(t)
	cfg := engine.DefaultConfig()
	cfg.UseKVEvents = true
	svc, err := core.New(core.Config{Engine: cfg, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	svc.EnableKVEvents()
	svc.OpenGate()
	srv := httptest.NewServer(api.New(svc, api.Options{Metrics: api.NewMetrics(svc), ReplicaID: "tcp://selector-a:9092"}))
	defer srv.Close()

	// Worker 1: two ranks whose KV-event endpoints have no publisher (the listeners show their
	// state); worker 2: one rank; worker 3: no block_size, so incomplete with a reason.
	for _, body := range []string{
		`{"worker_id":1,"model_name":"llama","endpoint":"http://worker-1:8000","block_size":16,"data_parallel_size":2,"kv_events_endpoints":{"0":"tcp://127.0.0.1:1","1":"tcp://127.0.0.1:2"}}`,
		`{"worker_id":2,"model_name":"llama","endpoint":"http://worker-2:8000","block_size":16,"kv_events_endpoint":"tcp://127.0.0.1:3"}`,
		`{"worker_id":3,"model_name":"llama","endpoint":"http://worker-3:8000","kv_events_endpoint":"tcp://127.0.0.1:4"}`,
	} {
		if code, resp := post(t, srv.URL, "/workers", "application/json", body); code != 201 {
			t.Fatalf("register: %d %s", code, resp)
		}
	}
	for i := 0; i < 4; i++ {
		body := fmt.Sprintf(`{"model_name":"llama","token_ids":[%s]}`, strings.Repeat("7,", 16*(i+1))+"7")
		if code, resp := post(t, srv.URL, "/select_and_reserve", "application/json", body); code != 200 {
			t.Fatalf("book: %d %s", code, resp)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000))
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	requests := recordRequests(t, bctx)

	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ui?refresh=500"), chromedp.WaitVisible(`body[data-loaded="true"]`)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	workers, err := chromedp.Run(bctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll("#workers tbody tr")).map(r =>
			[r.dataset.workerId, r.querySelector(".lifecycle").textContent, r.querySelector(".reasons").textContent,
			 Array.from(r.querySelectorAll(".listener")).map(l => l.textContent).join(" ")])`))
	if err != nil {
		t.Fatal(err)
	}
	loads, err := chromedp.Run(bctx, chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll(".loadrow")).map(r =>
			[r.dataset.owner, r.querySelector(".loadtext").textContent, r.querySelector(".bar").style.width])`))
	if err != nil {
		t.Fatal(err)
	}
	partition, err := chromedp.Run(bctx, chromedp.Text(`#partitions tbody tr[data-partition="llama/default"]`))
	if err != nil {
		t.Fatal(err)
	}
	replica, err := chromedp.Run(bctx, chromedp.Text(`#replica`))
	if err != nil {
		t.Fatal(err)
	}
	if len(workers) != 3 {
		t.Fatalf("page shows workers %v, want 3", workers)
	}
	for _, w := range workers {
		switch w[0] {
		case "1":
			if w[1] != "schedulable" || !strings.Contains(w[3], "0: ") || !strings.Contains(w[3], "1: ") {
				t.Errorf("worker 1 row %q", w)
			}
		case "3":
			if w[1] != "incomplete" || !strings.Contains(w[2], "block_size") {
				t.Errorf("worker 3 row %q: want incomplete with a block_size reason", w)
			}
		}
	}
	// Every schedulable rank has a load bar, and the page's request counts are the service's.
	want := map[string]string{}
	for _, p := range svc.Loads("llama", "") {
		for _, l := range p.Loads {
			want[fmt.Sprintf("%d:%d", l.WorkerID, l.DPRank)] = fmt.Sprintf("%d requests", l.ActiveRequests)
		}
	}
	total := 0
	for _, l := range loads {
		if w, ok := want[l[0]]; !ok || !strings.HasPrefix(l[1], w) {
			t.Errorf("load row %q, want %q", l, w)
		}
		if l[2] == "" {
			t.Errorf("load row %q has no bar width", l)
		}
		var n int
		fmt.Sscanf(l[1], "%d", &n)
		total += n
	}
	if len(loads) != len(want) || total != 4 {
		t.Errorf("load rows %v: want %d rows carrying 4 requests", loads, len(want))
	}
	if !strings.Contains(partition, "llama") || !strings.Contains(replica, "selector-a") {
		t.Errorf("partition row %q, replica %q", partition, replica)
	}

	// A worker registered now shows up by the page's own refresh.
	if code, resp := post(t, srv.URL, "/workers", "application/json", `{"worker_id":4,"model_name":"llama","endpoint":"http://worker-4:8000","block_size":16}`); code != 201 {
		t.Fatalf("register: %d %s", code, resp)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(`#workers tbody tr[data-worker-id="4"]`)); err != nil {
		t.Fatalf("worker 4 never appeared: %v", err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(os.TempDir(), fmt.Sprintf("kvselect-status-page-%d.png", time.Now().UnixNano()))
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("status page screenshot: %s", shot)
	fmt.Fprintln(os.Stderr, "status page screenshot:", shot)
	if *update {
		if err := os.WriteFile(uiScreenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	checkStatusPageEscapes(t, bctx, srv.URL)
	checkSameOriginOnly(t, requests(), srv.URL)
}
