package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/http/aibrix"
	"github.com/kvselect/kvselect/http/aibrix/aibrixcore"
	"github.com/kvselect/kvselect/http/api"
)

// Checks of deploy/examples against the real code: the policy loads with the AIBrix loader; the
// worker bodies are registered through a real HTTP API (on a loopback socket) configured with the
// kvselect container's environment, and each becomes schedulable; the API then answers the probe
// and scrape routes the manifests use, and the gateway's endpoint path serves a decision for the
// example fleet; the gateway environment obeys AIBrix's configuration rules and points at the
// kvselect Service.

const (
	examplePolicy   = "examples/aibrix-policy.yaml"
	exampleWorkers  = "examples/workers.json"
	exampleGateway  = "examples/aibrix-gateway-patch.yaml"
	gatewayEnvStart = "AIBRIX_EXTERNAL_ROUTER_"
)

func (c *checker) checkExamples(main *variant) {
	data, err := c.readDeployFile(examplePolicy)
	if err == nil {
		var pol *aibrix.Policy
		if pol, err = aibrix.ParsePolicy(data); err == nil {
			c.policies = append(c.policies, pol)
		}
	}
	if err != nil {
		c.add(fmt.Errorf("%s: %w: %w", examplePolicy, ErrPolicy, err))
	}
	// Any other YAML under examples/ is a Kubernetes document and must have the basic fields.
	files, _ := filepath.Glob(filepath.Join(c.root, "deploy", "examples", "*.yaml"))
	for _, f := range files {
		rel := "examples/" + filepath.Base(f)
		if rel == examplePolicy {
			continue
		}
		data, err := c.readDeployFile(rel)
		if err == nil {
			_, err = decodeDocs(data, rel)
		}
		c.add(err)
	}
	c.checkGateway(main)
	c.checkWorkers(main)
}

// kvContainer returns the first kvselect workload and container of v.
func kvContainer(v *variant) (*workload, *container) {
	for _, w := range v.workloads {
		for i := range w.spec.Template.Spec.Containers {
			if ct := &w.spec.Template.Spec.Containers[i]; imageRepo(ct.Image) == "kvselect" {
				return w, ct
			}
		}
	}
	return nil, nil
}

// checkWorkers registers the example workers on a real API and exercises it.
func (c *checker) checkWorkers(main *variant) {
	bad := func(format string, a ...any) {
		c.add(fmt.Errorf("%s: %w: "+format, append([]any{exampleWorkers, ErrWorkers}, a...)...))
	}
	w, ct := kvContainer(main)
	if w == nil {
		bad("no kvselect container in %s", main.dir)
		return
	}
	data, err := c.readDeployFile(exampleWorkers)
	if err != nil {
		bad("%v", err)
		return
	}
	var bodies []json.RawMessage
	if err := json.Unmarshal(data, &bodies); err != nil || len(bodies) < 2 {
		bad("want a JSON array of at least 2 POST /workers bodies (%v)", err)
		return
	}
	for i, b := range bodies {
		var spec engine.WorkerSpec
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			bad("worker %d: %v", i, err)
			continue
		}
		checkDPRanks(&spec, func(msg string) { bad("worker %d: %s", i, msg) })
	}

	// The service as the container configures it: DYN_ROUTER_* from its literal environment. A
	// setting that, say, enables queueing would make max_num_batched_tokens mandatory, and the
	// example workers would then have to carry it to become schedulable.
	env, _ := podEnv(ct, w.podNames()[0], main.namespace)
	cfg, err := core.ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		bad("kvselect environment: %v", err)
		return
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	svc, err := core.New(cfg)
	if err != nil {
		bad("%v", err)
		return
	}
	defer func() { _ = svc.Close() }()
	path := c.kvAIBrix[w]
	var pol *aibrix.Policy
	if len(c.policies) > 0 {
		pol = c.policies[0]
	}
	ab, err := aibrix.NewHandler(aibrix.Config{Path: path, Policy: pol}, aibrixcore.Backend{Svc: svc}, slog.New(slog.DiscardHandler))
	if err != nil {
		bad("aibrix handler: %v", err)
		return
	}
	srv := httptest.NewServer(api.New(svc, api.Options{Metrics: api.NewMetrics(svc), AIBrix: ab, AIBrixPath: path}))
	defer srv.Close()
	client := &http.Client{Timeout: 10 * time.Second}
	do := func(method, p string, hdr map[string]string, body []byte) (int, []byte) {
		req, err := http.NewRequest(method, srv.URL+p, bytes.NewReader(body))
		if err != nil {
			return 0, nil
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, []byte(err.Error())
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, out
	}
	// /ready is 503 without a schedulable worker: the reason the manifests publish not-ready
	// addresses and start pods in parallel. If this ever changes, those choices should be revisited.
	if st, _ := do("GET", "/ready", nil, nil); st != http.StatusServiceUnavailable {
		bad("GET /ready before registration = %d, want 503", st)
	}
	for i, b := range bodies {
		st, out := do("POST", "/workers", map[string]string{"Content-Type": "application/json"}, b)
		var rec struct {
			Lifecycle string   `json:"lifecycle"`
			Reasons   []string `json:"not_schedulable_reasons"`
		}
		_ = json.Unmarshal(out, &rec)
		if st != http.StatusCreated || rec.Lifecycle != engine.LifecycleSchedulable {
			bad("worker %d: POST /workers = %d, lifecycle %q %v", i, st, rec.Lifecycle, rec.Reasons)
		}
	}
	if st, out := do("GET", "/workers", nil, nil); st != http.StatusOK || bytes.Count(out, []byte(`"worker_id"`)) != len(bodies) {
		bad("GET /workers = %d lists %d workers, want %d distinct", st, bytes.Count(out, []byte(`"worker_id"`)), len(bodies))
	}
	// The manifests' probe and scrape routes, served for real.
	for _, p := range []string{"/ready", "/health", w.spec.Template.Metadata.Annotations["prometheus.io/path"]} {
		if st, _ := do("GET", p, nil, nil); st != http.StatusOK {
			bad("GET %s after registration = %d, want 200", p, st)
		}
	}
	checkDecision(do, path, bodies, bad)
}

// checkDPRanks requires a data-parallel worker (the example's point) with one KV-event endpoint
// per global rank, on vLLM's port layout: base port + (rank - start rank).
func checkDPRanks(s *engine.WorkerSpec, bad func(string)) {
	if s.DataParallelSize == nil || *s.DataParallelSize < 2 {
		bad("data_parallel_size must be at least 2 (the example shows DP ranks)")
		return
	}
	start := uint32(0)
	if s.DataParallelStartRank != nil {
		start = *s.DataParallelStartRank
	}
	base := 0
	for r := start; r < start+*s.DataParallelSize; r++ {
		ep, ok := s.KVEventsEndpoints[fmt.Sprint(r)]
		if !ok {
			bad(fmt.Sprintf("no kv_events_endpoints entry for rank %d", r))
			return
		}
		_, port, _, err := splitURL(ep, 0)
		if err != nil {
			bad(err.Error())
			return
		}
		if r == start {
			base = port
		} else if port != base+int(r-start) {
			bad(fmt.Sprintf("rank %d publishes on %d, vLLM uses %d", r, port, base+int(r-start)))
		}
	}
}

// checkDecision asks the AIBrix endpoint to choose among the example workers, as the gateway
// would with pods named by their stable_routing_id, and requires a Selected decision for one of
// them.
func checkDecision(do func(m, p string, hdr map[string]string, b []byte) (int, []byte), path string, bodies []json.RawMessage, bad func(string, ...any)) {
	req := &aibrix.Request{RequestID: "deploy-check-1", PolicyMode: aibrix.Advisory}
	var ids []string
	// Two ports per candidate: one vLLM API server per DP rank, which lets kvselect map the
	// least-loaded rank to its port (see aibrix.LoadOf).
	for _, b := range bodies {
		var s engine.WorkerSpec
		if json.Unmarshal(b, &s) != nil || s.StableRoutingID == nil || s.ModelName == nil {
			bad("every example worker needs stable_routing_id and model_name for AIBrix")
			return
		}
		req.Model = *s.ModelName
		cand := aibrix.Candidate{ID: *s.StableRoutingID, Ports: []int{8000, 8001}}
		for k, v := range s.TopologyDomains {
			cand.Attributes = append(cand.Attributes, aibrix.Attribute{Name: k, Value: v})
		}
		req.Candidates = append(req.Candidates, cand)
		ids = append(ids, cand.ID)
	}
	st, out := do("POST", path, map[string]string{"Content-Type": aibrix.MediaType, "X-Request-Id": req.RequestID},
		aibrix.AppendRequest(nil, req))
	var resp struct {
		Status struct {
			Decision string `json:"decision"`
			Target   struct {
				ID string `json:"id"`
			} `json:"target"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &resp); err != nil || st != http.StatusOK || resp.Status.Decision != string(aibrix.Selected) ||
		!slices.Contains(ids, resp.Status.Target.ID) {
		bad("POST %s for the example fleet = %d %s, want Selected one of %v", path, st, out, ids)
	}
}

// gatewayKnown lists the gateway's external-router variables (AIBrix configuration table).
var gatewayKnown = []string{"ENDPOINT", "POLICY_MODE", "FAILURE_MODE", "FALLBACK", "TIMEOUT", "MAX_INFLIGHT",
	"MAX_REQUEST_BYTES", "MAX_RESPONSE_BYTES", "FAILURE_THRESHOLD", "OPEN_DURATION", "AUTH_TOKEN_FILE",
	"CANDIDATE_ATTRIBUTES", "CANDIDATE_METRICS", "POLICY_ATTRIBUTES"}

// gatewayListItem is the gateway's rule for each item of its comma-separated lists.
var gatewayListItem = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_./-]{0,127}$`)

// checkGateway validates the gateway environment by AIBrix's rules and its endpoint against main.
func (c *checker) checkGateway(main *variant) {
	bad := func(format string, a ...any) {
		c.add(fmt.Errorf("%s: %w: "+format, append([]any{exampleGateway, ErrGateway}, a...)...))
	}
	data, err := c.readDeployFile(exampleGateway)
	if err != nil {
		bad("%v", err)
		return
	}
	docs, err := decodeDocs(data, exampleGateway)
	if err != nil {
		c.add(err)
		return
	}
	if len(docs) != 1 || docs[0].Kind != "Deployment" {
		bad("want one Deployment patch")
		return
	}
	var spec workloadSpec
	if err := docs[0].field("spec", &spec); err != nil || len(spec.Template.Spec.Containers) != 1 {
		bad("want one container (%v)", err)
		return
	}
	env := map[string]string{}
	for _, e := range spec.Template.Spec.Containers[0].Env {
		env[e.Name] = strings.TrimSpace(e.Value)
		if name, ok := strings.CutPrefix(e.Name, gatewayEnvStart); ok && !slices.Contains(gatewayKnown, name) {
			bad("unknown variable %s", e.Name)
		}
	}
	get := func(k string) string { return env[gatewayEnvStart+k] }
	// The cross-field rules of the gateway's configuration table: an invalid combination makes the
	// gateway refuse the external strategy at startup.
	mode, failure, fallback := get("POLICY_MODE"), get("FAILURE_MODE"), get("FALLBACK")
	switch {
	case mode != "Advisory" && mode != "Authoritative":
		bad("POLICY_MODE %q", mode)
	case failure != "FailOpen" && failure != "FailClosed":
		bad("FAILURE_MODE %q", failure)
	case mode == "Authoritative" && failure != "FailClosed":
		bad("Authoritative requires FailClosed")
	case (mode == "Advisory" || failure == "FailOpen") &&
		(fallback == "" || fallback == "external" || fallback == "pd" || strings.HasPrefix(fallback, "slo")):
		bad("FALLBACK %q: Advisory or FailOpen needs a local non-exclusive router", fallback)
	}
	for _, k := range []string{"TIMEOUT", "OPEN_DURATION"} {
		if v := get(k); v != "" {
			if d, err := time.ParseDuration(v); err != nil || d <= 0 {
				bad("%s %q is not a positive duration", k, v)
			}
		}
	}
	lists := map[string][]string{}
	for _, k := range []string{"CANDIDATE_ATTRIBUTES", "CANDIDATE_METRICS", "POLICY_ATTRIBUTES"} {
		if get(k) == "" {
			continue
		}
		items := strings.Split(get(k), ",")
		for i, it := range items {
			items[i] = strings.TrimSpace(it)
			if !gatewayListItem.MatchString(items[i]) || slices.Contains(items[:i], items[i]) {
				bad("%s item %q is invalid or repeated", k, items[i])
			}
		}
		if len(items) > 32 {
			bad("%s has more than 32 items", k)
		}
		lists[k] = items
	}
	for _, m := range lists["CANDIDATE_METRICS"] {
		if m != "runningRequests" && m != "engineUtilization" && m != "kvCacheUsage" {
			bad("CANDIDATE_METRICS item %q", m)
		}
	}
	// A policy rule on an attribute the gateway never sends can never match.
	for _, pol := range c.policies {
		for _, a := range policyAttributes(pol) {
			if !slices.Contains(lists["CANDIDATE_ATTRIBUTES"], a) {
				bad("policy attribute %s is not in CANDIDATE_ATTRIBUTES", a)
			}
		}
	}
	c.checkGatewayEndpoint(main, docs[0].Metadata.Namespace, get("ENDPOINT"), bad)
}

// checkGatewayEndpoint requires the endpoint to reach kvselect's --port through a Service, from
// the gateway's namespace, at kvselect's --aibrix-path.
func (c *checker) checkGatewayEndpoint(main *variant, fromNS, endpoint string, bad func(string, ...any)) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		bad("ENDPOINT %q is not an absolute http(s) URL without userinfo or fragment", endpoint)
		return
	}
	def := 80
	if u.Scheme == "https" {
		def = 443
	}
	host, port, path, err := splitURL(endpoint, def)
	if err != nil {
		bad("ENDPOINT: %v", err)
		return
	}
	ts, err := main.resolve(host, port, fromNS)
	if err != nil {
		c.add(fmt.Errorf("%s: ENDPOINT: %w", exampleGateway, err))
		return
	}
	for _, t := range ts {
		if hp, ok := c.kvHTTP[t.w]; !ok || hp != t.port || t.ordinal >= 0 || t.direct {
			bad("ENDPOINT reaches %s port %d, not a ClusterIP kvselect Service on --port (which skips unready replicas)", t.w, t.port)
		} else if c.kvAIBrix[t.w] != path {
			bad("ENDPOINT path %q, kvselect serves AIBrix at --aibrix-path %q", path, c.kvAIBrix[t.w])
		}
	}
}

// policyAttributes returns the candidate attributes a policy's rules read.
func policyAttributes(p *aibrix.Policy) []string {
	var out []string
	for _, r := range p.Requirements {
		out = append(out, r.Attribute)
	}
	for _, r := range p.Preferences {
		out = append(out, r.Attribute)
	}
	return out
}
