package deploy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Source files the checks read, relative to the repository root. They are parsed, never imported:
// cmd/kvselect is package main, and reading the declarations keeps this package's tests
// independent of the binary's wiring. The mutation tests copy exactly these files.
const (
	flagsSource = "cmd/kvselect/flags.go"
	// extraFlagSources are further files of the same flag set (a glob).
	extraFlagSources = "cmd/kvselect/flags_*.go"
	routesSource     = "http/api/server.go"
	envSource        = "core/envconfig.go"
	goModSource      = "go.mod"
)

// flagSpec is one flag declaration of kvselect's flag set.
type flagSpec struct {
	name string
	// kind is the flag.FlagSet method's value type: "string", "int", "int64", "uint",
	// "uint64", "float64", "bool" or "duration".
	kind string
	// def is the literal default when the declaration spells one (e.g. 8092, "/v1alpha1/select"),
	// else "" (a default computed by an expression is unknown here).
	def    string
	hasDef bool
}

// flagMethods maps flag.FlagSet declaration methods to (value kind, index of the name argument).
var flagMethods = map[string]struct {
	kind    string
	nameArg int
}{
	"StringVar": {"string", 1}, "String": {"string", 0},
	"IntVar": {"int", 1}, "Int": {"int", 0},
	"Int64Var": {"int64", 1}, "Int64": {"int64", 0},
	"UintVar": {"uint", 1}, "Uint": {"uint", 0},
	"Uint64Var": {"uint64", 1}, "Uint64": {"uint64", 0},
	"Float64Var": {"float64", 1}, "Float64": {"float64", 0},
	"BoolVar": {"bool", 1}, "Bool": {"bool", 0},
	"DurationVar": {"duration", 1}, "Duration": {"duration", 0},
	"Var": {"string", 1}, "Func": {"string", 0}, "TextVar": {"string", 1},
	"BoolFunc": {"bool", 0},
}

// parseFlagDecls returns the flags declared in src: every call fs.<Method>(...) whose receiver is
// the identifier fs (the name flags.go uses for its *flag.FlagSet) and whose name argument is a
// string literal. A declaration whose name is not a literal is an ErrSource (the checks would
// silently miss that flag), and so is finding no flag at all (a renamed receiver must not make
// every manifest argument "unknown" or, worse, the check vacuous).
//
// Only declarations are read, not the validation after fs.Parse (mutually exclusive flags, port
// ranges): the checks accept what the flag set accepts, and the real binary may still reject a
// combination. The manifests use no such combination.
func parseFlagDecls(src []byte) (map[string]flagSpec, error) {
	f, err := parser.ParseFile(token.NewFileSet(), flagsSource, src, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", flagsSource, ErrSource, err)
	}
	flags := make(map[string]flagSpec)
	var bad error
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || bad != nil {
			return bad == nil
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		recv, ok := sel.X.(*ast.Ident)
		m, known := flagMethods[sel.Sel.Name]
		if !ok || recv.Name != "fs" || !known {
			return true
		}
		if len(call.Args) <= m.nameArg {
			bad = fmt.Errorf("%s: %w: fs.%s with %d arguments", flagsSource, ErrSource, sel.Sel.Name, len(call.Args))
			return false
		}
		name, ok := stringLit(call.Args[m.nameArg])
		if !ok {
			bad = fmt.Errorf("%s: %w: fs.%s name is not a string literal", flagsSource, ErrSource, sel.Sel.Name)
			return false
		}
		spec := flagSpec{name: name, kind: m.kind}
		if m.nameArg == 1 && len(call.Args) > 2 && sel.Sel.Name != "Var" && sel.Sel.Name != "TextVar" {
			spec.def, spec.hasDef = literal(call.Args[2])
		}
		if _, dup := flags[name]; dup {
			bad = fmt.Errorf("%s: %w: flag %q declared twice", flagsSource, ErrSource, name)
			return false
		}
		flags[name] = spec
		return true
	})
	if bad != nil {
		return nil, bad
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("%s: %w: no fs.XxxVar declarations found", flagsSource, ErrSource)
	}
	return flags, nil
}

// parseRoutes returns the "METHOD /path" routes registered in src: calls r.GET/POST/PUT/PATCH/
// DELETE/HEAD(path, ...) and r.Handler/Handle/HandlerFunc(method, path, ...) where path is a
// string literal and method a literal or http.MethodXxx. Registration helpers are followed one
// level: a function (declared, or a literal assigned to a name) that registers its first
// parameter as a path, e.g. get := func(path string, h Handle) { r.GET(path, h); r.HEAD(path, h) },
// registers those methods for every call get("/literal", ...).
func parseRoutes(src []byte) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), routesSource, src, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", routesSource, ErrSource, err)
	}
	// Pass 1: helpers, by name, with the methods they register for their first parameter.
	helpers := map[string][]string{}
	addHelper := func(name string, ft *ast.FuncType, body *ast.BlockStmt) {
		if ft.Params == nil || len(ft.Params.List) == 0 || len(ft.Params.List[0].Names) == 0 || body == nil {
			return
		}
		param := ft.Params.List[0].Names[0].Name
		ast.Inspect(body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if meth, arg, ok := registration(call); ok {
					if id, ok := arg.(*ast.Ident); ok && id.Name == param {
						helpers[name] = append(helpers[name], meth)
					}
				}
			}
			return true
		})
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch d := n.(type) {
		case *ast.FuncDecl:
			addHelper(d.Name.Name, d.Type, d.Body)
		case *ast.AssignStmt:
			for i, rhs := range d.Rhs {
				if lit, ok := rhs.(*ast.FuncLit); ok && i < len(d.Lhs) {
					if id, ok := d.Lhs[i].(*ast.Ident); ok {
						addHelper(id.Name, lit.Type, lit.Body)
					}
				}
			}
		}
		return true
	})
	// Pass 2: registrations with literal paths, direct or through a helper. Any receiver is
	// accepted: server.go registers on a single httprouter, and a route with a non-literal path
	// (the AIBrix path) is not a probe target.
	routes := make(map[string]bool)
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if meth, arg, ok := registration(call); ok {
			if p, ok := stringLit(arg); ok && strings.HasPrefix(p, "/") {
				routes[meth+" "+p] = true
			}
		}
		if id, ok := call.Fun.(*ast.Ident); ok && len(call.Args) > 0 {
			if p, ok := stringLit(call.Args[0]); ok && strings.HasPrefix(p, "/") {
				for _, meth := range helpers[id.Name] {
					routes[meth+" "+p] = true
				}
			}
		}
		return true
	})
	if len(routes) == 0 {
		return nil, fmt.Errorf("%s: %w: no route registrations found", routesSource, ErrSource)
	}
	return routes, nil
}

// envNamePattern is the shape of the environment variable names the code reads.
var envNamePattern = regexp.MustCompile(`^(DYN|KVSELECT)_[A-Z0-9_]+$`)

// parseEnvNames returns every string literal of src that looks like a DYN_* or KVSELECT_*
// variable name: the names ConfigFromEnv and the flag defaults look up.
func parseEnvNames(name string, src []byte) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), name, src, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrSource, err)
	}
	names := make(map[string]bool)
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := stringLit(n); ok && envNamePattern.MatchString(s) {
			names[s] = true
		}
		return true
	})
	return names, nil
}

// registration recognises a route registration call and returns its method and path argument.
func registration(call *ast.CallExpr) (method string, path ast.Expr, ok bool) {
	sel, isSel := call.Fun.(*ast.SelectorExpr)
	if !isSel {
		return "", nil, false
	}
	switch m := sel.Sel.Name; m {
	case "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD":
		if len(call.Args) > 0 {
			return m, call.Args[0], true
		}
	case "Handler", "Handle", "HandlerFunc":
		if len(call.Args) > 1 {
			if meth, ok := httpMethod(call.Args[0]); ok {
				return meth, call.Args[1], true
			}
		}
	}
	return "", nil, false
}

// goModVersions returns the go directive and the required version of nats-server from go.mod:
// the Go the image must be built with, and the nats-server the NATS image must run (the version
// every bus test of the repository runs against).
func goModVersions(src []byte) (goVersion, natsServer string, err error) {
	for _, line := range strings.Split(string(src), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 2 && fields[0] == "go":
			goVersion = fields[1]
		case len(fields) >= 2 && fields[0] == "github.com/nats-io/nats-server/v2":
			natsServer = fields[1]
		case len(fields) >= 3 && fields[0] == "require" && fields[1] == "github.com/nats-io/nats-server/v2":
			natsServer = fields[2]
		}
	}
	if goVersion == "" || natsServer == "" {
		return "", "", fmt.Errorf("%s: %w: go directive or nats-server requirement not found", goModSource, ErrSource)
	}
	return goVersion, natsServer, nil
}

// stringLit returns the value of a string literal node.
func stringLit(n ast.Node) (string, bool) {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// literal returns the value of a basic literal (string unquoted) or of the identifiers true/false.
func literal(n ast.Expr) (string, bool) {
	switch v := n.(type) {
	case *ast.BasicLit:
		if v.Kind == token.STRING {
			return stringLit(v)
		}
		return v.Value, true
	case *ast.Ident:
		if v.Name == "true" || v.Name == "false" {
			return v.Name, true
		}
	}
	return "", false
}

// httpMethod reads a method argument: a string literal or net/http's MethodXxx constant.
func httpMethod(n ast.Expr) (string, bool) {
	if s, ok := stringLit(n); ok {
		return s, true
	}
	sel, ok := n.(*ast.SelectorExpr)
	if !ok || !strings.HasPrefix(sel.Sel.Name, "Method") {
		return "", false
	}
	return strings.ToUpper(strings.TrimPrefix(sel.Sel.Name, "Method")), true
}

// sources holds everything the checks read from the Go side of the repository.
type sources struct {
	flags      map[string]flagSpec
	routes     map[string]bool
	env        map[string]bool
	goVersion  string
	natsServer string
}

// readSources parses the source files under root.
func readSources(root string) (*sources, error) {
	read := func(rel string) ([]byte, error) {
		b, err := os.ReadFile(root + "/" + rel)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSource, err)
		}
		return b, nil
	}
	s := &sources{}
	b, err := read(flagsSource)
	if err != nil {
		return nil, err
	}
	if s.flags, err = parseFlagDecls(b); err != nil {
		return nil, err
	}
	flagEnv, err := parseEnvNames(flagsSource, b)
	if err != nil {
		return nil, err
	}
	// Flag groups registered from their own files (cmd/kvselect/flags_*.go, e.g. flags_ops.go)
	// belong to the same flag set.
	extra, _ := filepath.Glob(root + "/" + extraFlagSources)
	for _, path := range extra {
		eb, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSource, err)
		}
		more, err := parseFlagDecls(eb)
		if err != nil && !strings.Contains(err.Error(), "no fs.XxxVar declarations") {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for name, spec := range more {
			if _, dup := s.flags[name]; dup {
				return nil, fmt.Errorf("%s: %w: flag %q declared twice", path, ErrSource, name)
			}
			s.flags[name] = spec
		}
		env, err := parseEnvNames(path, eb)
		if err != nil {
			return nil, err
		}
		for k := range env {
			flagEnv[k] = true
		}
	}
	if b, err = read(routesSource); err != nil {
		return nil, err
	}
	if s.routes, err = parseRoutes(b); err != nil {
		return nil, err
	}
	if b, err = read(envSource); err != nil {
		return nil, err
	}
	if s.env, err = parseEnvNames(envSource, b); err != nil {
		return nil, err
	}
	for k := range flagEnv {
		s.env[k] = true
	}
	if b, err = read(goModSource); err != nil {
		return nil, err
	}
	if s.goVersion, s.natsServer, err = goModVersions(b); err != nil {
		return nil, err
	}
	return s, nil
}
