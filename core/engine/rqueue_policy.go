package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"

	yaml "go.yaml.in/yaml/v3"
)

// Router-queue policy classes (DYN_ROUTER_POLICY_CONFIG), with Dynamo's schema, validation
// messages and classification:
//
//	default_policy_family: normal
//	uncached_isl_buckets: [{min_tokens: 0, bucket: short}, {min_tokens: 2048, bucket: long}]
//	policy_classes:
//	  - {name: normal-short, policy_family: normal, cache_bucket: short, quantum: 1024,
//	     queue_policy: wspt, prefill_busy_threshold_frac: 8.0}
//	  - {name: normal-long, policy_family: normal, cache_bucket: long, quantum: 256,
//	     prefill_busy_threshold: 32768, request_queue_limit_per_worker: 64}
//	  - {name: vip, quantum: 4096, prefill_busy_threshold_frac: 8.0}
//	models: {<model_name>: {<the three keys above>}}
//
// A profile (the root, or models[model_name], which replaces the root wholly) is a grid of
// family classes — one per (policy family, uncached-ISL bucket) — plus explicit classes chosen
// only by name. A request's class: the x-dynamo-meta-policy-class header naming an explicit
// class; else the family it names, or the default family, at the bucket of its uncached
// tokens (isl − the best effective cached prefix over the ranks it may use). Without a
// configuration file, or for a model with no profile and no root, one synthetic class
// "default" applies router_queue_threshold and router_queue_policy. A class with no busy
// threshold never queues. Unknown keys are errors at every level.

// policyClass is one validated class.
type policyClass struct {
	name    string
	family  string // "" for an explicit class
	quantum uint64
	policy  string // fcfs, wspt (lcfs only in the synthetic class)
	busy    BusyRule
	// limits per worker, by limitKinds; nil = none.
	limits [3]*uint64
}

// limitKinds name the queue limits in checking order (the limit_kind of a rejection).
var limitKinds = [3]string{"requests", "raw_isl_tokens", "cached_tokens"}

// queues reports whether the class ever parks requests (it has a busy threshold).
func (c *policyClass) queues() bool { return c.busy.Tokens != nil || c.busy.Frac != nil }

// isBucket is one uncached-ISL bucket: requests with at least min uncached tokens.
type isBucket struct {
	min  uint64
	name string
}

// policyProfile is one validated profile.
type policyProfile struct {
	defaultFamily string
	buckets       []isBucket // ascending min, the first at 0
	classes       []*policyClass
	explicit      map[string]int   // explicit class name → index in classes
	families      map[string][]int // family → class index per bucket
}

// Policies is a parsed router policy configuration: it resolves a partition's model name to
// its profile. Immutable once parsed. The engine adds the synthetic profile (router_queue_policy
// and router_queue_threshold) for models with none.
type Policies struct {
	root      *policyProfile
	models    map[string]*policyProfile
	synthetic *policyProfile
}

func (ps *Policies) forModel(model string) *policyProfile {
	if p := ps.models[model]; p != nil {
		return p
	}
	if ps.root != nil {
		return ps.root
	}
	return ps.synthetic
}

// classify returns the class index of a request with the given header value and uncached
// tokens.
func (p *policyProfile) classify(header string, uncached uint64) int {
	if i, ok := p.explicit[header]; ok {
		return i
	}
	if p.families == nil {
		return 0 // the synthetic profile
	}
	fam, ok := p.families[header]
	if !ok {
		fam = p.families[p.defaultFamily]
	}
	b := 0
	for i := range p.buckets {
		if p.buckets[i].min <= uncached {
			b = i
		}
	}
	return fam[b]
}

// queues reports whether any class of the profile has a busy threshold, so that requests may
// park and workers need max_num_batched_tokens (Dynamo's queueing_enabled(model)).
func (p *policyProfile) queues() bool {
	for _, c := range p.classes {
		if c.queues() {
			return true
		}
	}
	return false
}

// needsProbe reports whether classification depends on the request's cached prefix.
func (p *policyProfile) needsProbe() bool { return len(p.buckets) > 1 }

// YAML layout. Pointers tell absent from zero.
type (
	policyFileYAML struct {
		profileYAML `yaml:",inline"`       // the root profile
		Models      map[string]profileYAML `yaml:"models"`
	}
	profileYAML struct {
		DefaultPolicyFamily *string      `yaml:"default_policy_family"`
		UncachedISLBuckets  []bucketYAML `yaml:"uncached_isl_buckets"`
		PolicyClasses       []classYAML  `yaml:"policy_classes"`
	}
	bucketYAML struct {
		MinTokens *uint64 `yaml:"min_tokens"`
		Bucket    *string `yaml:"bucket"`
	}
	classYAML struct {
		Name                           *string  `yaml:"name"`
		PolicyFamily                   *string  `yaml:"policy_family"`
		CacheBucket                    *string  `yaml:"cache_bucket"`
		QueuePolicy                    *string  `yaml:"queue_policy"`
		Quantum                        *uint64  `yaml:"quantum"`
		PrefillBusyThreshold           *uint64  `yaml:"prefill_busy_threshold"`
		PrefillBusyThresholdFrac       *float64 `yaml:"prefill_busy_threshold_frac"`
		RequestQueueLimitPerWorker     *uint64  `yaml:"request_queue_limit_per_worker"`
		RawISLTokenQueueLimitPerWorker *uint64  `yaml:"raw_isl_token_queue_limit_per_worker"`
		CachedTokenQueueLimitPerWorker *uint64  `yaml:"cached_token_queue_limit_per_worker"`
		BusyWorkerRatio                *float64 `yaml:"busy_worker_ratio"`
	}
)

// ErrPolicyInvalid marks validation errors (as opposed to YAML syntax errors).
var ErrPolicyInvalid = errors.New("invalid router policy config")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrPolicyInvalid, fmt.Sprintf(format, args...))
}

var policyName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// ParsePolicies decodes and validates a router policy configuration file's bytes (core reads
// the file named by Config.PolicyConfig; the engine does no I/O). Validation errors wrap
// ErrPolicyInvalid; others are YAML syntax errors.
func ParsePolicies(b []byte) (*Policies, error) {
	ps := &Policies{}
	var f policyFileYAML
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) { // empty: "must define" below
		return nil, err
	}
	rootAny := f.DefaultPolicyFamily != nil || f.UncachedISLBuckets != nil || f.PolicyClasses != nil
	rootAll := f.DefaultPolicyFamily != nil && f.UncachedISLBuckets != nil && f.PolicyClasses != nil
	if rootAny && !rootAll {
		return nil, invalid("root profile must specify default_policy_family, uncached_isl_buckets, and policy_classes when any root profile field is present")
	}
	if !rootAny && len(f.Models) == 0 {
		return nil, invalid("router policy config must define a root profile or at least one model profile")
	}
	if rootAny {
		p, err := buildProfile("root", f.profileYAML)
		if err != nil {
			return nil, err
		}
		ps.root = p
	}
	ps.models = make(map[string]*policyProfile, len(f.Models))
	for _, name := range slices.Sorted(maps.Keys(f.Models)) {
		m := f.Models[name]
		if name == "" {
			return nil, invalid("model profile name must not be empty")
		}
		loc := fmt.Sprintf("model %q", name)
		if m.DefaultPolicyFamily == nil || m.UncachedISLBuckets == nil || m.PolicyClasses == nil {
			return nil, invalid("%s must specify default_policy_family, uncached_isl_buckets, and policy_classes", loc)
		}
		p, err := buildProfile(loc, m)
		if err != nil {
			return nil, err
		}
		ps.models[name] = p
	}
	return ps, nil
}

// buildProfile validates one profile; loc is "root" or `model "<name>"`.
func buildProfile(loc string, y profileYAML) (*policyProfile, error) {
	name := func(kind, n string) error {
		if !policyName.MatchString(n) {
			return invalid("%s %s name %q must match [A-Za-z0-9_.-]+", loc, kind, n)
		}
		return nil
	}
	if len(y.PolicyClasses) == 0 {
		return nil, invalid("%s policy_classes must not be empty", loc)
	}
	if len(y.UncachedISLBuckets) == 0 {
		return nil, invalid("%s uncached_isl_buckets must not be empty", loc)
	}
	p := &policyProfile{explicit: map[string]int{}, families: map[string][]int{}}
	bucketIdx := map[string]int{}
	for i, b := range y.UncachedISLBuckets {
		if b.MinTokens == nil || b.Bucket == nil {
			return nil, invalid("%s uncached_isl_buckets entries need min_tokens and bucket", loc)
		}
		if err := name("cache bucket", *b.Bucket); err != nil {
			return nil, err
		}
		if i == 0 && *b.MinTokens != 0 {
			return nil, invalid("%s uncached_isl_buckets must start at min_tokens 0", loc)
		}
		if i > 0 && *b.MinTokens <= p.buckets[i-1].min {
			return nil, invalid("%s uncached_isl_buckets min_tokens must be strictly increasing", loc)
		}
		if _, dup := bucketIdx[*b.Bucket]; dup {
			return nil, invalid("%s contains duplicate cache bucket %q", loc, *b.Bucket)
		}
		bucketIdx[*b.Bucket] = i
		p.buckets = append(p.buckets, isBucket{min: *b.MinTokens, name: *b.Bucket})
	}
	seen := map[string]bool{}
	for _, cy := range y.PolicyClasses {
		if cy.Name == nil {
			return nil, invalid("%s policy class is missing name", loc)
		}
		n := *cy.Name
		if err := name("policy class", n); err != nil {
			return nil, err
		}
		if cy.Quantum == nil || *cy.Quantum == 0 {
			return nil, invalid("%s policy class %q quantum must be greater than zero", loc, n)
		}
		c := &policyClass{name: n, quantum: *cy.Quantum, policy: "fcfs",
			busy:   BusyRule{Tokens: cy.PrefillBusyThreshold, Frac: cy.PrefillBusyThresholdFrac},
			limits: [3]*uint64{cy.RequestQueueLimitPerWorker, cy.RawISLTokenQueueLimitPerWorker, cy.CachedTokenQueueLimitPerWorker}}
		if cy.QueuePolicy != nil {
			if *cy.QueuePolicy != "fcfs" && *cy.QueuePolicy != "wspt" {
				return nil, invalid("%s policy class %q queue_policy must be fcfs or wspt", loc, n)
			}
			c.policy = *cy.QueuePolicy
		}
		if f := cy.PrefillBusyThresholdFrac; f != nil && (math.IsNaN(*f) || math.IsInf(*f, 0) || *f < 0) {
			return nil, invalid("%s policy class %q prefill_busy_threshold_frac must be finite and non-negative", loc, n)
		}
		if r := cy.BusyWorkerRatio; r != nil {
			if math.IsNaN(*r) || *r <= 0 || *r > 1 {
				return nil, invalid("%s policy class %q busy_worker_ratio must be a finite fraction in (0.0, 1.0]", loc, n)
			}
			if !c.queues() {
				return nil, invalid("%s policy class %q busy_worker_ratio requires prefill_busy_threshold or prefill_busy_threshold_frac", loc, n)
			}
			c.busy.Ratio = r
		}
		if (cy.PolicyFamily == nil) != (cy.CacheBucket == nil) {
			return nil, invalid("%s policy class %q must specify both policy_family and cache_bucket or neither for an explicit class", loc, n)
		}
		if cy.PolicyFamily != nil {
			if err := name("policy family", *cy.PolicyFamily); err != nil {
				return nil, err
			}
			if _, ok := bucketIdx[*cy.CacheBucket]; !ok {
				return nil, invalid("%s policy class %q references unknown cache bucket %q", loc, n, *cy.CacheBucket)
			}
			c.family = *cy.PolicyFamily
		}
		if seen[n] {
			return nil, invalid("%s contains duplicate policy class %q", loc, n)
		}
		seen[n] = true
		p.classes = append(p.classes, c)
	}
	for i, c := range p.classes {
		cy := y.PolicyClasses[i]
		if c.family == "" {
			p.explicit[c.name] = i
			continue
		}
		cells := p.families[c.family]
		if cells == nil {
			cells = make([]int, len(p.buckets))
			for j := range cells {
				cells[j] = -1
			}
			p.families[c.family] = cells
		}
		b := bucketIdx[*cy.CacheBucket]
		if cells[b] >= 0 {
			return nil, invalid("%s contains duplicate policy classes for family %q and bucket %q", loc, c.family, *cy.CacheBucket)
		}
		cells[b] = i
	}
	p.defaultFamily = *y.DefaultPolicyFamily
	if _, ok := p.families[p.defaultFamily]; !ok {
		return nil, invalid("%s default_policy_family %q does not name a configured family", loc, p.defaultFamily)
	}
	for _, n := range slices.Sorted(maps.Keys(p.explicit)) {
		if _, ok := p.families[n]; ok {
			return nil, invalid("%s explicit policy class %q collides with a policy family", loc, n)
		}
	}
	for _, fam := range slices.Sorted(maps.Keys(p.families)) {
		for b, ci := range p.families[fam] {
			if ci < 0 {
				return nil, invalid("%s is missing a policy class for family %q and bucket %q", loc, fam, p.buckets[b].name)
			}
		}
	}
	return p, nil
}
