package aibrix

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// ErrInvalidPolicy wraps every policy loading or validation failure. The
// message names the offending field by path (e.g. `requirements[1].values`).
var ErrInvalidPolicy = errors.New("invalid routing policy")

// Policy is the operator's routing policy. The zero Policy (or a nil
// *Policy) makes every valid candidate eligible, has no preferences or deny
// rules, no sessions, and uses [DefaultLoadWeights].
//
// A Policy is immutable once returned by [ParsePolicy]/[LoadPolicy] and safe
// for concurrent use by any number of decisions.
type Policy struct {
	// SessionKey names a trusted spec.policyContext attribute whose value
	// identifies a session. Empty disables stickiness.
	SessionKey string `yaml:"sessionKey"`
	// SessionTTL is how long an idle session stays bound (default 10m).
	SessionTTL time.Duration `yaml:"sessionTTL"`
	// NoMatchReason is status.reason when no candidate is eligible
	// (default "NoEligibleCandidate").
	NoMatchReason string `yaml:"noMatchReason"`
	// Requirements are hard filters: every in-scope requirement must hold.
	Requirements []Requirement `yaml:"requirements"`
	// Preferences subtract their weight from a matching candidate's cost.
	Preferences []Preference `yaml:"preferences"`
	// Deny rules refuse the whole request when in scope (first match wins).
	Deny []DenyRule `yaml:"deny"`
	// Load weighs the load terms of the cost (see the package doc).
	Load LoadWeights `yaml:"load"`
}

// Scope limits a rule to some requests. Empty Models matches every model;
// every Context entry must match the request's policyContext attribute of
// that name (a missing attribute never matches). The zero Scope matches all.
type Scope struct {
	Models  []string            `yaml:"models"`
	Context map[string]ValueSet `yaml:"context"`
}

// ValueSet is a set of accepted strings; in YAML either a scalar or a list.
type ValueSet []string

// UnmarshalYAML accepts `key: value` as well as `key: [a, b]`.
func (v *ValueSet) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*v = ValueSet{s}
		return nil
	}
	var list []string
	if err := n.Decode(&list); err != nil {
		return err
	}
	*v = list
	return nil
}

// Contains reports whether s is in the set.
func (v ValueSet) Contains(s string) bool { return slices.Contains(v, s) }

// Requirement: in-scope candidates must carry Attribute with one of Values.
type Requirement struct {
	Name      string `yaml:"name"`
	Scope     `yaml:",inline"`
	Attribute string   `yaml:"attribute"`
	Values    ValueSet `yaml:"values"`
}

// Preference: in-scope candidates whose Attribute is one of Values have
// Weight subtracted from their cost. Weight is in "running requests"
// units; a negative weight is a penalty.
type Preference struct {
	Name      string `yaml:"name"`
	Scope     `yaml:",inline"`
	Attribute string   `yaml:"attribute"`
	Values    ValueSet `yaml:"values"`
	Weight    float64  `yaml:"weight"`
}

// DenyRule refuses in-scope requests with Reason: Denied in Authoritative
// mode, NoDecision in Advisory mode (the only refusal Advisory allows). A
// deny rule must name models or context so it cannot deny everything by
// accident.
type DenyRule struct {
	Name   string `yaml:"name"`
	Scope  `yaml:",inline"`
	Reason string `yaml:"reason"`
}

// MaxWeight bounds every policy weight, so that no sum of weighted terms can overflow to ±Inf
// (whose differences are NaN and would make the choice depend on the candidates' wire order).
// 1e9 running requests is far beyond any meaningful preference.
const MaxWeight = 1e9

// LoadWeights weigh the load terms of the cost function. All must be
// finite and >= 0. The all-zero value means "unset" and is replaced by
// [DefaultLoadWeights] (so a Policy built in code stays load-aware); to make
// load irrelevant, use tiny weights and large preference weights instead.
type LoadWeights struct {
	Requests          float64 `yaml:"requests"`
	KVCacheUsage      float64 `yaml:"kvCacheUsage"`
	EngineUtilization float64 `yaml:"engineUtilization"`
	PrefillTokens     float64 `yaml:"prefillTokens"`
	DecodeBlocks      float64 `yaml:"decodeBlocks"`
}

// Defaults.
const (
	DefaultSessionTTL    = 10 * time.Minute
	DefaultNoMatchReason = "NoEligibleCandidate"
)

// DefaultLoadWeights: one running request costs 1; a full KV cache costs 4;
// full engine utilisation 2; 512 uncomputed prefill tokens cost 1; 64
// active decode blocks cost 1.
var DefaultLoadWeights = LoadWeights{
	Requests:          1,
	KVCacheUsage:      4,
	EngineUtilization: 2,
	PrefillTokens:     1.0 / 512,
	DecodeBlocks:      1.0 / 64,
}

// LoadPolicy reads a YAML or JSON policy file; see [ParsePolicy].
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// ParsePolicy decodes one YAML (or JSON) document, rejecting unknown fields
// and duplicate keys, fills defaults and validates every rule.
func ParsePolicy(data []byte) (*Policy, error) {
	p := &Policy{Load: DefaultLoadWeights}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(p); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: the policy document is empty", ErrInvalidPolicy)
		}
		return nil, fmt.Errorf("%w: %s%w", ErrInvalidPolicy, locateYAMLError(data, err), err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: the file must hold exactly one document", ErrInvalidPolicy)
	}
	if p.SessionTTL == 0 {
		p.SessionTTL = DefaultSessionTTL
	}
	if p.NoMatchReason == "" {
		p.NoMatchReason = DefaultNoMatchReason
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// lineRE finds the "line N:" prefixes of yaml.v3 error messages.
var lineRE = regexp.MustCompile(`line (\d+):`)

// locateYAMLError turns the first line number of a yaml error into the path
// of the field on that line ("requirements[0].values: "), so type errors
// name the offending field and not only a line. It returns "" when unknown.
func locateYAMLError(data []byte, err error) string {
	m := lineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	line, convErr := strconv.Atoi(m[1])
	if convErr != nil {
		return ""
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return ""
	}
	if path := yamlPathAtLine(&root, line, ""); path != "" {
		return path + ": "
	}
	return ""
}

// yamlPathAtLine returns the path of the deepest key or element starting on
// line, searching depth-first.
func yamlPathAtLine(n *yaml.Node, line int, path string) string {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if p := yamlPathAtLine(c, line, path); p != "" {
				return p
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := k.Value
			if path != "" {
				kp = path + "." + k.Value
			}
			if p := yamlPathAtLine(v, line, kp); p != "" {
				return p
			}
			if k.Line == line {
				return kp
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			ip := fmt.Sprintf("%s[%d]", path, i)
			if p := yamlPathAtLine(c, line, ip); p != "" {
				return p
			}
			if c.Line == line {
				return ip
			}
		}
	}
	return ""
}

func policyErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidPolicy, field, fmt.Sprintf(format, args...))
}

// Validate checks every field; the error names the first offending field.
func (p *Policy) Validate() error {
	if p.SessionKey != "" && !ValidAttributeName(p.SessionKey) {
		return policyErr("sessionKey", "%q is not a valid attribute name", p.SessionKey)
	}
	if p.SessionTTL < 0 {
		return policyErr("sessionTTL", "must be positive, got %v", p.SessionTTL)
	}
	if err := checkReason("noMatchReason", p.NoMatchReason, false); err != nil {
		return err
	}
	for i, r := range p.Requirements {
		f := fmt.Sprintf("requirements[%d]", i)
		if err := checkMatch(f, r.Scope, r.Attribute, r.Values); err != nil {
			return err
		}
	}
	for i, r := range p.Preferences {
		f := fmt.Sprintf("preferences[%d]", i)
		if err := checkMatch(f, r.Scope, r.Attribute, r.Values); err != nil {
			return err
		}
		if r.Weight == 0 || math.IsNaN(r.Weight) || math.Abs(r.Weight) > MaxWeight {
			return policyErr(f+".weight", "must be a non-zero number with magnitude at most %g, got %v", float64(MaxWeight), r.Weight)
		}
	}
	for i, r := range p.Deny {
		f := fmt.Sprintf("deny[%d]", i)
		if err := checkScope(f, r.Scope); err != nil {
			return err
		}
		if len(r.Models) == 0 && len(r.Context) == 0 {
			return policyErr(f, "a deny rule must name models or context")
		}
		if err := checkReason(f+".reason", r.Reason, true); err != nil {
			return err
		}
	}
	w := p.Load
	for _, t := range []struct {
		name string
		v    float64
	}{
		{"requests", w.Requests}, {"kvCacheUsage", w.KVCacheUsage},
		{"engineUtilization", w.EngineUtilization}, {"prefillTokens", w.PrefillTokens},
		{"decodeBlocks", w.DecodeBlocks},
	} {
		if t.v < 0 || math.IsNaN(t.v) || t.v > MaxWeight {
			return policyErr("load."+t.name, "must be a number in [0, %g], got %v", float64(MaxWeight), t.v)
		}
	}
	return nil
}

// checkReason bounds a reason string to what the protocol allows in
// status.reason, so a valid policy can never produce an invalid response.
func checkReason(field, s string, required bool) error {
	if s == "" {
		if required {
			return policyErr(field, "is required")
		}
		return nil
	}
	if len(s) > MaxIDBytes {
		return policyErr(field, "must be at most %d bytes", MaxIDBytes)
	}
	return nil
}

// checkMatch validates the shared shape of requirements and preferences:
// a valid scope, an attribute name the Gateway could actually send (same
// pattern as the protocol's attribute keys) and at least one value.
func checkMatch(f string, s Scope, attr string, values ValueSet) error {
	if err := checkScope(f, s); err != nil {
		return err
	}
	if !ValidAttributeName(attr) {
		return policyErr(f+".attribute", "%q is not a valid attribute name", attr)
	}
	if len(values) == 0 {
		return policyErr(f+".values", "must list at least one value")
	}
	return nil
}

// checkScope validates model names and context keys. Context keys are
// checked in sorted order so the reported field is deterministic even
// though Context is a map.
func checkScope(f string, s Scope) error {
	for i, m := range s.Models {
		if m == "" {
			return policyErr(fmt.Sprintf("%s.models[%d]", f, i), "must not be empty")
		}
	}
	keys := make([]string, 0, len(s.Context))
	for k := range s.Context {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !ValidAttributeName(k) {
			return policyErr(f+".context", "%q is not a valid attribute name", k)
		}
		if len(s.Context[k]) == 0 {
			return policyErr(f+".context."+k, "must list at least one value")
		}
	}
	return nil
}

// applies reports whether the scope covers a request for model with the
// given trusted policy context.
func (s *Scope) applies(model string, ctx Attributes) bool {
	if len(s.Models) > 0 && !slices.Contains(s.Models, model) {
		return false
	}
	for k, vs := range s.Context {
		v, ok := ctx.Lookup(k)
		if !ok || !vs.Contains(v) {
			return false
		}
	}
	return true
}
