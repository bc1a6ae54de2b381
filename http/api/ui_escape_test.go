package api_test

// Hostile catalog contents on the status page (part of TestStatusPageInChromium): every string
// the page renders from the API can be set by anyone who can POST /workers, so it must be
// shown as text, never parsed as markup; and the page must load nothing from other origins.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/kvselect/kvselect/internal/poll"
)

const (
	xssEndpoint = `<img src=x onerror=alert(1)>`
	xssModel    = `<img src=y onerror=alert(2)><b class=injected>m</b>`
)

// recordRequests records the URL of every request the tab makes from now on, and every
// Content-Security-Policy refusal the browser logs (a request the CSP blocks is never sent, so
// an external reference shows up only as a refusal), as "csp: " + the message.
func recordRequests(t *testing.T, bctx context.Context) func() []string {
	t.Helper()
	var mu sync.Mutex
	var urls []string
	if err := chromedp.Listen(bctx, func(ev any) {
		var u string
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if e.Request != nil {
				u = e.Request.URL
			}
		case *cdplog.EventEntryAdded:
			if e.Entry != nil && strings.Contains(e.Entry.Text, "Content Security Policy") {
				u = "csp: " + e.Entry.Text
			}
		}
		if u != "" {
			mu.Lock()
			urls = append(urls, u)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(urls)
	}
}

// checkSameOriginOnly: the page fetched only its own assets and the JSON API, from base.
func checkSameOriginOnly(t *testing.T, urls []string, base string) {
	t.Helper()
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"/ui": true, "/ui/app.js": true, "/ui/app.css": true, "/status": true, "/favicon.ico": true}
	sawStatus := false
	for _, raw := range urls {
		if strings.HasPrefix(raw, "csp: ") {
			t.Errorf("the status page tried something its Content-Security-Policy refused: %s", raw)
			continue
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Errorf("unparsable request URL %q", raw)
			continue
		}
		if u.Scheme == "data" || u.Scheme == "about" {
			continue
		}
		if u.Host != b.Host || !allowed[u.Path] {
			t.Errorf("the status page requested %q: only %s's /ui assets and /status are allowed", raw, b.Host)
		}
		sawStatus = sawStatus || u.Path == "/status"
	}
	if !sawStatus {
		t.Errorf("no request to /status was recorded (recorder broken?): %q", urls)
	}
}

// checkStatusPageEscapes registers workers whose endpoint, listener endpoint (which also lands
// in a not-schedulable reason) and model name are HTML, waits until the page shows them, and
// asserts they appear literally and injected nothing.
func checkStatusPageEscapes(t *testing.T, bctx context.Context, base string) {
	t.Helper()
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`window.__alerts = []; window.alert = m => { window.__alerts.push(String(m)); }; true`)); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		`{"worker_id":6,"model_name":"llama","block_size":16,"endpoint":` + jsonString(xssEndpoint) + `,"kv_events_endpoint":` + jsonString(xssEndpoint) + `}`,
		`{"worker_id":7,"model_name":` + jsonString(xssModel) + `,"block_size":16,"endpoint":"http://worker-7:8000","kv_events_endpoint":"tcp://127.0.0.1:5"}`,
	} {
		if code, resp := post(t, base, "/workers", "application/json", body); code != 201 {
			t.Fatalf("register %s: %d %s", body, code, resp)
		}
	}
	// A booking creates worker 7's partition (partitions and their load rows are listed once used).
	if code, resp := post(t, base, "/select_and_reserve", "application/json", `{"model_name":`+jsonString(xssModel)+`,"token_ids":[1,2,3]}`); code != 200 {
		t.Fatalf("book: %d %s", code, resp)
	}
	if err := chromedp.Do(bctx, chromedp.WaitVisible(`#workers tbody tr[data-worker-id="7"]`), chromedp.WaitVisible(`#workers tbody tr[data-worker-id="6"]`)); err != nil {
		t.Fatalf("hostile workers never appeared: %v", err)
	}
	poll.Until(t, poll.Generous, func() error {
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#partitions tbody tr").length`))
		if err == nil && n < 2 {
			err = fmt.Errorf("%d partition rows, want 2", n)
		}
		return err
	})
	type view struct {
		Injected  int      `json:"injected"`
		Alerts    []string `json:"alerts"`
		Endpoint  string   `json:"endpoint"`
		Reasons   string   `json:"reasons"`
		Model     string   `json:"model"`
		Partition []string `json:"partition"`
		Headings  []string `json:"headings"`
	}
	v, err := chromedp.Run(bctx, chromedp.Evaluate[view](`({
		injected: document.querySelectorAll("img, svg, iframe, object, embed, .injected, [onerror], [onload]").length,
		alerts: window.__alerts,
		endpoint: document.querySelector('#workers tr[data-worker-id="6"] td:nth-child(3)').textContent,
		reasons: document.querySelector('#workers tr[data-worker-id="6"] .reasons').textContent,
		model: document.querySelector('#workers tr[data-worker-id="7"] td:nth-child(2)').textContent,
		partition: Array.from(document.querySelectorAll("#partitions tbody tr td:first-child")).map(td => td.textContent),
		headings: Array.from(document.querySelectorAll("#loads h3")).map(h => h.textContent),
	})`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Injected != 0 || len(v.Alerts) != 0 {
		t.Errorf("catalog strings were parsed as HTML: %d injected elements, alerts %q", v.Injected, v.Alerts)
	}
	if v.Endpoint != xssEndpoint {
		t.Errorf("worker 6 endpoint cell %q, want the literal %q", v.Endpoint, xssEndpoint)
	}
	if !strings.Contains(v.Reasons, xssEndpoint) {
		t.Errorf("worker 6 reasons %q, want them to quote the literal endpoint %q", v.Reasons, xssEndpoint)
	}
	if v.Model != xssModel+" / default" {
		t.Errorf("worker 7 model cell %q, want the literal %q", v.Model, xssModel+" / default")
	}
	if !slices.Contains(v.Partition, xssModel) {
		t.Errorf("partition model cells %q, want the literal %q", v.Partition, xssModel)
	}
	if !slices.ContainsFunc(v.Headings, func(h string) bool { return strings.HasPrefix(h, xssModel+" / ") }) {
		t.Errorf("load headings %q, want one for the literal %q", v.Headings, xssModel)
	}
}

// jsonString is s as a JSON string literal.
func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
