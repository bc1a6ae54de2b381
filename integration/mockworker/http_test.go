package mockworker

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHTTPAPI drives the handler over a real loopback HTTP server: one table row per route,
// method and body shape, with the status and the body it must produce.
func TestHTTPAPI(t *testing.T) {
	w := newWorker(t, Config{BlockSize: 4, NumGPUBlocks: 64, MaxPromptTokens: 100, Clock: NewInstantClock(epoch0)})
	srv := httptest.NewServer(w.Handler())
	t.Cleanup(srv.Close)

	huge := `{"prompt_token_ids":[` + strings.Repeat("1,", 200000) + `1]}`
	cases := []struct {
		name, method, path, body string
		status                   int
		check                    func(t *testing.T, body []byte)
	}{
		{"health", "GET", "/health", "", 200, func(t *testing.T, b []byte) {
			if !strings.Contains(string(b), `"ok"`) {
				t.Fatalf("body %s", b)
			}
		}},
		{"completion cold", "POST", "/v1/completions", `{"prompt_token_ids":[1,2,3,4,5,6,7,8,9],"max_tokens":3,"model":"x"}`, 200,
			func(t *testing.T, b []byte) {
				var r Result
				if err := json.Unmarshal(b, &r); err != nil || r.CachedTokens != 0 || r.PromptTokens != 9 || r.TTFTMS <= 16 || r.E2EMS <= r.TTFTMS {
					t.Fatalf("result %s (%v)", b, err)
				}
			}},
		{"completion warm via prompt array", "POST", "/v1/completions", `{"prompt":[1,2,3,4,5,6,7,8,10],"max_tokens":0}`, 200,
			func(t *testing.T, b []byte) {
				var r Result
				if err := json.Unmarshal(b, &r); err != nil || r.CachedTokens != 8 || r.E2EMS != r.TTFTMS {
					t.Fatalf("result %s (%v)", b, err)
				}
			}},
		{"stats", "GET", "/stats", "", 200, func(t *testing.T, b []byte) {
			var st []RankStats
			if err := json.Unmarshal(b, &st); err != nil || len(st) != 1 || st[0].Requests != 2 || st[0].CachedBlocks != 2 {
				t.Fatalf("stats %s (%v)", b, err)
			}
		}},
		{"bad json", "POST", "/v1/completions", `{"prompt_token_ids":[1,`, 400, nil},
		{"trailing data", "POST", "/v1/completions", `{"prompt_token_ids":[1]} {}`, 400, nil},
		{"negative token", "POST", "/v1/completions", `{"prompt_token_ids":[-1]}`, 400, nil},
		{"text prompt", "POST", "/v1/completions", `{"prompt":"hello"}`, 400, nil},
		{"empty prompt", "POST", "/v1/completions", `{"prompt_token_ids":[]}`, 400, nil},
		{"no prompt", "POST", "/v1/completions", `{}`, 400, nil},
		{"too many tokens", "POST", "/v1/completions", `{"prompt_token_ids":[` + strings.Repeat("1,", 100) + `1]}`, 400, nil},
		{"body too large", "POST", "/v1/completions", huge, 413, nil},
		{"bad rank", "POST", "/v1/completions", `{"prompt_token_ids":[1],"dp_rank":2}`, 400, nil},
		{"wrong method", "GET", "/v1/completions", "", 405, nil},
		{"unknown path", "GET", "/nope", "", 404, nil},
		{"reset", "POST", "/admin/reset", "", 204, nil},
		{"restart", "POST", "/admin/restart", "", 204, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, c.status, body)
			}
			if c.status >= 400 && c.status != 404 && c.status != 405 {
				var e errorBody
				if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
					t.Fatalf("error body %s is not {\"error\": ...}", body)
				}
			}
			if c.check != nil {
				c.check(t, body)
			}
		})
	}
	_ = w.Close()
	resp, err := srv.Client().Get(srv.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("health after close: %d, want 503", resp.StatusCode)
	}
}

// TestStatusOf pins the error-to-status table.
func TestStatusOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{ErrBadRequest, 400}, {ErrBusy, 409}, {ErrClosed, 503}, {errors.New("x"), 500},
	} {
		if got := statusOf(c.err); got != c.want {
			t.Errorf("%v: %d, want %d", c.err, got, c.want)
		}
	}
}

// FuzzDecodeRequest: no input panics; an accepted body always has a non-empty prompt and
// re-encodes to an equal request.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"prompt_token_ids":[1,2,3],"max_tokens":4}`, `{"prompt":[5],"dp_rank":1}`, `{"prompt":"x"}`,
		`{"prompt_token_ids":[4294967295]}`, `[]`, `null`, ``, `{"prompt_token_ids":[1]} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		if len(req.PromptTokenIDs) == 0 {
			t.Fatal("accepted an empty prompt")
		}
		b, _ := json.Marshal(req)
		again, err := DecodeRequest(b)
		if err != nil || len(again.PromptTokenIDs) != len(req.PromptTokenIDs) {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
	})
}

// FuzzParseReplayRequest: replay requests are outside bytes; no input panics and an accepted
// one has exactly vLLM's shape.
func FuzzParseReplayRequest(f *testing.F) {
	f.Add([]byte("id"), []byte{}, []byte{0, 0, 0, 0, 0, 0, 0, 7}, false)
	f.Add([]byte{}, []byte{1}, []byte{1}, true)
	f.Fuzz(func(t *testing.T, a, b, c []byte, extra bool) {
		frames := [][]byte{a, b, c}
		if extra {
			frames = append(frames, nil)
		}
		_, _, err := ParseReplayRequest(frames)
		if ok := !extra && len(b) == 0 && len(c) == 8; ok != (err == nil) {
			t.Fatalf("frames %q: err %v", frames, err)
		}
	})
}
