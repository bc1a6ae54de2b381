package api_test

// The OpenAPI document against the real router and the real walk-through: every route New
// registers is documented and every documented operation is registered; the document is a valid
// OpenAPI 3.1 document; and every request and response of testdata/walkthrough.md (the README's
// walk-through, generated from the service's answers) validates against it with
// libopenapi-validator.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/kvselect/kvselect/http/api"
)

// openAPIOps returns the document's operations as "METHOD /path" (OpenAPI path syntax).
func openAPIOps(t *testing.T) map[string]bool {
	t.Helper()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Fatalf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	ops := map[string]bool{}
	for p, item := range doc.Paths {
		for m := range item {
			switch m {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				ops[strings.ToUpper(m)+" "+p] = true
			}
		}
	}
	return ops
}

var routeParam = regexp.MustCompile(`:([A-Za-z_]+)`)

func TestOpenAPICoversRouter(t *testing.T) {
	svc := newService(t)
	h := api.New(svc, api.Options{Metrics: api.NewMetrics(svc), AIBrix: http.NotFoundHandler()})
	routes := api.Routes(h)
	if len(routes) < 20 {
		t.Fatalf("api.Routes returned %d routes; the recorder is not seeing the router", len(routes))
	}
	registered := map[string]bool{}
	gets := map[string]bool{}
	for _, r := range routes {
		if r.Method == http.MethodGet {
			gets[r.Path] = true
		}
	}
	for _, r := range routes {
		p := routeParam.ReplaceAllString(r.Path, "{$1}")
		switch {
		case r.Method == http.MethodHead && gets[r.Path]:
			continue // HEAD is served by every GET route (net/http drops the body)
		case p == "/v1alpha1/select" && r.Method != http.MethodPost:
			continue // the AIBrix handler answers other methods with a 405 problem
		}
		registered[r.Method+" "+p] = true
	}
	documented := openAPIOps(t)
	for op := range registered {
		if !documented[op] {
			t.Errorf("route %s is registered but not in openapi.yaml", op)
		}
	}
	for op := range documented {
		if !registered[op] {
			t.Errorf("openapi.yaml documents %s, which the router does not serve", op)
		}
	}
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	srv := httptest.NewServer(api.New(newService(t), api.Options{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /openapi.json: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !bytes.Equal(body, api.OpenAPIDocument()) {
		t.Fatal("GET /openapi.json does not serve the embedded document")
	}
	v := newOpenAPIValidator(t, body)
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("document: %s", e.Error())
		}
	}
}

func newOpenAPIValidator(t *testing.T, spec []byte) validator.Validator {
	t.Helper()
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.GetSpecInfo().SpecFormat; v != "oas3_1" {
		t.Fatalf("libopenapi sees spec format %q, want oas3_1", v)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	return v
}

// walkExchange is one request and its answer, as written in walkthrough.md.
type walkExchange struct {
	line         int
	method, path string
	body         string
	status       int
	answer       string
}

var (
	curlURL    = regexp.MustCompile(`'http://localhost:8092([^']*)'`)
	curlMethod = regexp.MustCompile(`-X ([A-Z]+)`)
	curlBody   = regexp.MustCompile(`-d '([^']*)'`)
	statusLine = regexp.MustCompile("^`([0-9]{3}) [^`]*`$")
)

// parseWalkthrough reads every curl exchange of a generated walk-through document.
func parseWalkthrough(t *testing.T, name string) []walkExchange {
	t.Helper()
	f, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []walkExchange
	sc := bufio.NewScanner(bytes.NewReader(f))
	sc.Buffer(nil, 1<<20)
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return sc.Text(), true
	}
	for {
		s, ok := next()
		if !ok {
			break
		}
		if s != "```sh" {
			continue
		}
		var cmd strings.Builder
		for s, ok = next(); ok && s != "```"; s, ok = next() {
			cmd.WriteString(s + "\n")
		}
		c := cmd.String()
		u := curlURL.FindStringSubmatch(c)
		if u == nil {
			continue // not a request (e.g. the command that starts the service)
		}
		ex := walkExchange{line: line, method: "GET", path: u[1]}
		if m := curlMethod.FindStringSubmatch(c); m != nil {
			ex.method = m[1]
		}
		if b := curlBody.FindStringSubmatch(c); b != nil {
			ex.body = b[1]
		}
		for s, ok = next(); ok && !statusLine.MatchString(s); s, ok = next() {
		}
		ex.status, _ = strconv.Atoi(statusLine.FindStringSubmatch(s)[1])
		for s, ok = next(); ok && s != "```json"; s, ok = next() {
		}
		var ans strings.Builder
		for s, ok = next(); ok && s != "```"; s, ok = next() {
			ans.WriteString(s + "\n")
		}
		ex.answer = ans.String()
		out = append(out, ex)
	}
	return out
}

func TestOpenAPIValidatesWalkthrough(t *testing.T) {
	v := newOpenAPIValidator(t, api.OpenAPIDocument())
	exs := parseWalkthrough(t, walkthroughFile)
	if len(exs) < 20 {
		t.Fatalf("parsed %d exchanges from %s; the parser is out of step with the document", len(exs), walkthroughFile)
	}
	statuses := map[int]bool{}
	for _, ex := range exs {
		statuses[ex.status] = true
		name := fmt.Sprintf("%s:%d %s %s", walkthroughFile, ex.line, ex.method, ex.path)
		var rb io.Reader = http.NoBody
		if ex.body != "" {
			rb = strings.NewReader(ex.body)
		}
		req := httptest.NewRequest(ex.method, "http://localhost:8092"+ex.path, rb)
		if ex.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp := &http.Response{
			StatusCode: ex.status, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(ex.answer)), Request: req,
		}
		if ok, errs := v.ValidateHttpRequestResponse(req, resp); !ok {
			for _, e := range errs {
				t.Errorf("%s: %s (%s)", name, e.Message, e.Reason)
				for _, se := range e.SchemaValidationErrors {
					t.Errorf("    %s: %s", se.FieldPath, se.Reason)
				}
			}
		}
	}
	for _, want := range []int{200, 201, 404, 409, 503} {
		if !statuses[want] {
			t.Errorf("the walk-through has no %d answer any more; the validation covers less than it claims", want)
		}
	}
}

// TestOpenAPIValidatorRejects shows the walk-through validation can fail: answers and requests
// that break the documented schemas are caught.
func TestOpenAPIValidatorRejects(t *testing.T) {
	v := newOpenAPIValidator(t, api.OpenAPIDocument())
	cases := []struct {
		method, path, body string
		status             int
		answer             string
	}{
		{"GET", "/loads", "", 200, `[{"model_name":"m","routing_group":"g","loads":[{"worker_id":"one"}],"pending_count":0,"pending_isl_tokens":0}]`},
		{"POST", "/workers", `{"worker_id":-1}`, 201, `{}`},
		{"GET", "/ready", "", 503, `{"ready":false}`},
		{"POST", "/reservations", `{"model_name":"m"}`, 201, `{}`},
		{"GET", "/nowhere", "", 200, `{}`},
	}
	for _, c := range cases {
		var rb io.Reader = http.NoBody
		if c.body != "" {
			rb = strings.NewReader(c.body)
		}
		req := httptest.NewRequest(c.method, "http://localhost:8092"+c.path, rb)
		req.Header.Set("Content-Type", "application/json")
		resp := &http.Response{StatusCode: c.status, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(c.answer)), Request: req}
		if ok, _ := v.ValidateHttpRequestResponse(req, resp); ok {
			t.Errorf("%s %s %s → %d %s validated; want a schema violation", c.method, c.path, c.body, c.status, c.answer)
		}
	}
}
