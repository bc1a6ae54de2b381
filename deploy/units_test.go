package deploy

import (
	"errors"
	"math/big"
	"slices"
	"testing"
)

// Table tests of the checks' building blocks. The end-to-end behaviour is covered by TestDeploy
// and TestDeployMutations; these pin the edge cases those cannot reach.

// TestParseQuantity pins Kubernetes' quantity grammar where it is easy to get wrong: decimal vs
// binary suffixes, fractions, exponents, and "E" as exa rather than an exponent marker.
func TestParseQuantity(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want *big.Rat // nil: must be rejected
	}{
		{"2", big.NewRat(2, 1)},
		{"500m", big.NewRat(1, 2)},
		{"1Gi", big.NewRat(1<<30, 1)},
		{"1.5G", big.NewRat(1500000000, 1)},
		{"128Mi", big.NewRat(128<<20, 1)},
		{"1e3", big.NewRat(1000, 1)},
		{"1E", big.NewRat(1e18, 1)}, // exa, not an exponent
		{"0.5Ki", big.NewRat(512, 1)},
		// Rejected: empty, suffix only, negative, inner space, a non-Kubernetes suffix, an exponent
		// that would allocate a huge number, words.
		{"", nil}, {"Gi", nil}, {"-1", nil}, {"1 Gi", nil}, {"1GB", nil}, {"1e999999999", nil}, {"two", nil},
	} {
		got, err := parseQuantity(tc.in)
		switch {
		case tc.want == nil && !errors.Is(err, ErrResources):
			t.Errorf("parseQuantity(%q) = %v, %v; want ErrResources", tc.in, got, err)
		case tc.want != nil && (err != nil || got.Cmp(tc.want) != 0):
			t.Errorf("parseQuantity(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestParseGoMemLimit pins the runtime's GOMEMLIMIT syntax, which differs from Kubernetes' (MiB,
// not Mi; integers only): mixing the two up is a classic manifest mistake.
func TestParseGoMemLimit(t *testing.T) {
	for in, want := range map[string]int64{"900MiB": 900 << 20, "1GiB": 1 << 30, "4096": 4096, "10B": 10} {
		got, err := parseGoMemLimit(in)
		if err != nil || got.Cmp(big.NewRat(want, 1)) != 0 {
			t.Errorf("parseGoMemLimit(%q) = %v, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"900Mi", "1.5GiB", "", "-1"} {
		if _, err := parseGoMemLimit(in); !errors.Is(err, ErrResources) {
			t.Errorf("parseGoMemLimit(%q) accepted", in)
		}
	}
}

// TestExpand pins $(VAR) expansion: substitution, the $$ escape, and that unknown or malformed
// references stay literal (and unknown ones are reported).
func TestExpand(t *testing.T) {
	vars := map[string]string{"POD_NAME": "kvselect-1", "NS": "kvselect"}
	for _, tc := range []struct {
		in, want string
		undef    []string
	}{
		{"tcp://$(POD_NAME).peers:9092", "tcp://kvselect-1.peers:9092", nil},
		{"$(POD_NAME).$(NS)", "kvselect-1.kvselect", nil},
		{"$$(POD_NAME)", "$(POD_NAME)", nil},
		{"$(MISSING)x", "$(MISSING)x", []string{"MISSING"}},
		{"$(POD_NAME", "$(POD_NAME", nil},
		{"$POD_NAME", "$POD_NAME", nil},
		{"cost: $5", "cost: $5", nil},
	} {
		got, undef := expand(tc.in, vars)
		if got != tc.want || !slices.Equal(undef, tc.undef) {
			t.Errorf("expand(%q) = %q %v, want %q %v", tc.in, got, undef, tc.want, tc.undef)
		}
	}
}

// TestImageRef covers registry hosts with ports (whose colon is not a tag separator) and digests.
func TestImageRef(t *testing.T) {
	for _, tc := range []struct{ in, repo, tag string }{
		{"kvselect:latest", "kvselect", "latest"},
		{"registry.local:5000/team/kvselect:v1", "kvselect", "v1"},
		{"registry.local:5000/kvselect", "kvselect", ""},
		{"nats:2.15.3-alpine@sha256:abc", "nats", "2.15.3-alpine"},
		{"gcr.io/distroless/static-debian12:nonroot", "static-debian12", "nonroot"},
	} {
		if r, g := imageRepo(tc.in), imageTag(tc.in); r != tc.repo || g != tc.tag {
			t.Errorf("%q: repo %q tag %q, want %q %q", tc.in, r, g, tc.repo, tc.tag)
		}
	}
}

// TestSplitURL covers default ports, paths, bad ports and host:port strings that are not URLs.
func TestSplitURL(t *testing.T) {
	for _, tc := range []struct {
		in, host, path string
		port           int
		err            error
	}{
		{"nats://nats:4222", "nats", "", 4222, nil},
		{"http://kvselect.kvselect.svc:8092/v1alpha1/select", "kvselect.kvselect.svc", "/v1alpha1/select", 8092, nil},
		{"nats://nats", "nats", "", 4222, nil},
		{"nats://nats:99999", "", "", 0, ErrPort},
		{"nats-0:4222", "", "", 0, ErrDNS},
	} {
		host, port, path, err := splitURL(tc.in, 4222)
		if !errors.Is(err, tc.err) || (err == nil && (host != tc.host || port != tc.port || path != tc.path)) {
			t.Errorf("splitURL(%q) = %q %d %q %v", tc.in, host, port, path, err)
		}
	}
}

// TestDisruptionsAllowed covers both budget forms, Kubernetes' rounding of percentages (both round
// up), and the invalid shapes (neither or both fields set, bad percentages).
func TestDisruptionsAllowed(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		pdb  pdbSpec
		n    int
		want int
		err  bool
	}{
		{pdbSpec{MaxUnavailable: s("1")}, 3, 1, false},
		{pdbSpec{MinAvailable: s("2")}, 3, 1, false},
		{pdbSpec{MinAvailable: s("3")}, 3, 0, false},
		{pdbSpec{MinAvailable: s("50%")}, 3, 1, false}, // ceil(1.5) = 2 must stay
		{pdbSpec{MaxUnavailable: s("34%")}, 3, 2, false},
		{pdbSpec{}, 3, 0, true},
		{pdbSpec{MinAvailable: s("1"), MaxUnavailable: s("1")}, 3, 0, true},
		{pdbSpec{MaxUnavailable: s("x%")}, 3, 0, true},
	} {
		got, err := disruptionsAllowed(tc.pdb, tc.n)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("%+v of %d: %d, %v; want %d (err %v)", tc.pdb, tc.n, got, err, tc.want, tc.err)
		}
	}
}

// TestNATSConfigPath covers the spellings nats-server accepts for its configuration file.
func TestNATSConfigPath(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"nats-server", "--config", "/etc/n.conf"}, "/etc/n.conf"},
		{[]string{"nats-server", "-c", "/a"}, "/a"},
		{[]string{"nats-server", "--config=/b"}, "/b"},
		{[]string{"nats-server", "--config"}, ""},
		{nil, ""},
	} {
		if got := natsConfigPath(tc.argv); got != tc.want {
			t.Errorf("natsConfigPath(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// TestParseFlagDecls runs the flag reader on a synthetic source: both declaration forms, literal
// and computed defaults, a receiver other than fs (ignored), and the source shapes it must refuse.
func TestParseFlagDecls(t *testing.T) {
	src := `package main
func parse() {
	fs.StringVar(&o.a, "alpha", "x", "")
	fs.IntVar(&o.p, "port", 8092, "")
	fs.BoolVar(&o.b, "beta", false, "")
	fs.DurationVar(&o.d, "every", 10*time.Second, "")
	n := fs.Int("count", 3, "")
	other.StringVar(&o.z, "not-a-flag", "", "")
	_ = n
}`
	got, err := parseFlagDecls([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]flagSpec{
		"alpha": {name: "alpha", kind: "string", def: "x", hasDef: true},
		"port":  {name: "port", kind: "int", def: "8092", hasDef: true},
		"beta":  {name: "beta", kind: "bool", def: "false", hasDef: true},
		"every": {name: "every", kind: "duration"},
		"count": {name: "count", kind: "int"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %+v, want %+v", k, got[k], w)
		}
	}
	for _, bad := range []string{
		`package main; func f() { fs.StringVar(&x, name, "", "") }`,
		`package main; func f() { fs.StringVar(&x, "a", "", ""); fs.IntVar(&y, "a", 0, "") }`,
		`package main; func f() {}`,
		`package main; func f( {`,
	} {
		if _, err := parseFlagDecls([]byte(bad)); !errors.Is(err, ErrSource) {
			t.Errorf("parseFlagDecls(%q) = %v, want ErrSource", bad, err)
		}
	}
}

// TestParseRoutes runs the route reader on a synthetic source: method helpers, Handler with a
// constant or literal method, and registrations it must skip (non-literal or relative paths).
func TestParseRoutes(t *testing.T) {
	src := `package api
func New() {
	r.GET("/health", h)
	r.POST("/workers", h)
	r.Handler(http.MethodGet, "/metrics", m)
	r.Handler("DELETE", "/x", m)
	r.GET(path, h)
	r.GET("relative", h)
	get := func(path string, h Handle) { r.GET(path, h); r.HEAD(path, h) }
	get("/ready", h)
	get(p, h)
	other := func(x int, path string) { r.GET(path, nil) }
	other(1, "/not-a-route")
}`
	got, err := parseRoutes([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"GET /health", "POST /workers", "GET /metrics", "DELETE /x", "GET /ready", "HEAD /ready"} {
		if !got[r] {
			t.Errorf("missing %s in %v", r, got)
		}
	}
	if len(got) != 6 {
		t.Errorf("got %d routes %v, want 6", len(got), got)
	}
}

// TestParseDockerfile covers directives and ARG before FROM, continuation lines with a comment in
// the middle, stage names, and input Docker itself would refuse.
func TestParseDockerfile(t *testing.T) {
	df := "# syntax=docker/dockerfile:1\nARG V=1\nFROM golang:1.26 AS build\nRUN go build \\\n  # a comment inside\n  -o /out/k ./cmd/kvselect\nFROM scratch\nCOPY --from=build /out/k /k\n"
	st, err := parseDockerfile(df)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0].name != "build" || st[1].image != "scratch" {
		t.Fatalf("stages %+v", st)
	}
	if got := st[0].inst[0].args; got != "go build -o /out/k ./cmd/kvselect" {
		t.Errorf("continued RUN = %q", got)
	}
	b, err := findGoBuild(st)
	if err != nil || b.output != "/out/k" || b.cgoOff {
		t.Errorf("findGoBuild = %+v, %v", b, err)
	}
	for _, bad := range []string{"", "RUN x\nFROM a", "FROM --platform=x"} {
		if _, err := parseDockerfile(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("parseDockerfile(%q) = %v, want ErrSyntax", bad, err)
		}
	}
}
