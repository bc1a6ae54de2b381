package engine

import (
	"strings"
	"testing"
	"time"
)

// exampleYAML is the example of rqueue_policy.go's documentation.
const exampleYAML = `
default_policy_family: normal
uncached_isl_buckets:
  - {min_tokens: 0, bucket: short}
  - {min_tokens: 2048, bucket: long}
policy_classes:
  - {name: normal-short, policy_family: normal, cache_bucket: short, queue_policy: wspt, quantum: 1024, prefill_busy_threshold_frac: 8.0}
  - {name: normal-long, policy_family: normal, cache_bucket: long, quantum: 256, prefill_busy_threshold: 32768, request_queue_limit_per_worker: 64}
  - {name: batch-short, policy_family: batch, cache_bucket: short, quantum: 64}
  - {name: batch-long, policy_family: batch, cache_bucket: long, quantum: 64}
  - {name: vip, quantum: 4096, prefill_busy_threshold_frac: 8.0}
`

func parsePolicies(t *testing.T, text string) (*Policies, error) {
	t.Helper()
	ps, err := ParsePolicies([]byte(text))
	if ps != nil {
		ps.synthetic = syntheticProfile(&Config{})
	}
	return ps, err
}

func TestPolicyConfigValidation(t *testing.T) {
	const buckets = "uncached_isl_buckets: [{min_tokens: 0, bucket: s}, {min_tokens: 10, bucket: l}]\n"
	const grid = "  - {name: fs, policy_family: f, cache_bucket: s, quantum: 1}\n  - {name: fl, policy_family: f, cache_bucket: l, quantum: 1}\n"
	root := func(classes string) string {
		return "default_policy_family: f\n" + buckets + "policy_classes:\n" + grid + classes
	}
	cases := []struct {
		name, yaml, want string
	}{
		{"empty file", "", "router policy config must define a root profile or at least one model profile"},
		{"partial root", "default_policy_family: f\n", "root profile must specify default_policy_family, uncached_isl_buckets, and policy_classes when any root profile field is present"},
		{"unknown key", root("") + "surprise: 1\n", "field surprise not found"},
		{"unknown class key", root("  - {name: x, quantum: 1, colour: red}\n"), "field colour not found"},
		{"bad class name", root("  - {name: 'a b', quantum: 1}\n"), `root policy class name "a b" must match [A-Za-z0-9_.-]+`},
		{"zero quantum", root("  - {name: x, quantum: 0}\n"), `root policy class "x" quantum must be greater than zero`},
		{"lcfs", root("  - {name: x, quantum: 1, queue_policy: lcfs}\n"), `root policy class "x" queue_policy must be fcfs or wspt`},
		{"negative frac", root("  - {name: x, quantum: 1, prefill_busy_threshold_frac: -1}\n"), `root policy class "x" prefill_busy_threshold_frac must be finite and non-negative`},
		{"ratio out of range", root("  - {name: x, quantum: 1, prefill_busy_threshold: 5, busy_worker_ratio: 1.5}\n"), `root policy class "x" busy_worker_ratio must be a finite fraction in (0.0, 1.0]`},
		{"ratio without threshold", root("  - {name: x, quantum: 1, busy_worker_ratio: 0.5}\n"), `root policy class "x" busy_worker_ratio requires prefill_busy_threshold or prefill_busy_threshold_frac`},
		{"family without bucket", root("  - {name: x, quantum: 1, policy_family: f}\n"), `root policy class "x" must specify both policy_family and cache_bucket or neither for an explicit class`},
		{"unknown bucket", root("  - {name: x, quantum: 1, policy_family: g, cache_bucket: z}\n"), `root policy class "x" references unknown cache bucket "z"`},
		{"duplicate class", root("  - {name: fs, quantum: 1}\n"), `root contains duplicate policy class "fs"`},
		{"duplicate cell", root("  - {name: x, quantum: 1, policy_family: f, cache_bucket: s}\n"), `root contains duplicate policy classes for family "f" and bucket "s"`},
		{"missing cell", root("  - {name: gs, quantum: 1, policy_family: g, cache_bucket: s}\n"), `root is missing a policy class for family "g" and bucket "l"`},
		{"explicit collides with family", root("  - {name: f, quantum: 1}\n"), `root explicit policy class "f" collides with a policy family`},
		{"unknown default family", strings.Replace(root(""), "default_policy_family: f", "default_policy_family: nope", 1), `root default_policy_family "nope" does not name a configured family`},
		{"buckets not from 0", "default_policy_family: f\nuncached_isl_buckets: [{min_tokens: 5, bucket: s}]\npolicy_classes: [{name: fs, policy_family: f, cache_bucket: s, quantum: 1}]\n", "root uncached_isl_buckets must start at min_tokens 0"},
		{"buckets not increasing", "default_policy_family: f\nuncached_isl_buckets: [{min_tokens: 0, bucket: s}, {min_tokens: 0, bucket: l}]\npolicy_classes: [{name: fs, policy_family: f, cache_bucket: s, quantum: 1}]\n", "root uncached_isl_buckets min_tokens must be strictly increasing"},
		{"duplicate bucket", "default_policy_family: f\nuncached_isl_buckets: [{min_tokens: 0, bucket: s}, {min_tokens: 3, bucket: s}]\npolicy_classes: [{name: fs, policy_family: f, cache_bucket: s, quantum: 1}]\n", `root contains duplicate cache bucket "s"`},
		{"no classes", "default_policy_family: f\n" + buckets + "policy_classes: []\n", "root policy_classes must not be empty"},
		{"model loc", "models:\n  llama:\n    default_policy_family: f\n    " + strings.ReplaceAll(buckets, "\n", "\n    ") + "policy_classes: [{name: fs, policy_family: f, cache_bucket: s, quantum: 0}]\n", `model "llama" policy class "fs" quantum must be greater than zero`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parsePolicies(t, tc.yaml)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := parsePolicies(t, exampleYAML); err != nil {
		t.Fatalf("the documented example is invalid: %v", err)
	}
}

func TestPolicyClassify(t *testing.T) {
	ps, err := parsePolicies(t, exampleYAML+`models:
  special:
    default_policy_family: only
    uncached_isl_buckets: [{min_tokens: 0, bucket: all}]
    policy_classes: [{name: only-all, policy_family: only, cache_bucket: all, quantum: 1}]
`)
	if err != nil {
		t.Fatal(err)
	}
	root := ps.forModel("llama")
	name := func(p *policyProfile, header string, uncached uint64) string {
		return p.classes[p.classify(header, uncached)].name
	}
	cases := []struct {
		header   string
		uncached uint64
		want     string
	}{
		{"", 0, "normal-short"},
		{"", 2047, "normal-short"},
		{"", 2048, "normal-long"},
		{"batch", 5000, "batch-long"},
		{"batch", 10, "batch-short"},
		{"vip", 99999, "vip"},
		{"no-such-class", 3000, "normal-long"},
		{"normal-long", 10, "normal-short"}, // a grid class's own name is not a selector
	}
	for _, tc := range cases {
		if got := name(root, tc.header, tc.uncached); got != tc.want {
			t.Errorf("classify(%q, %d) = %s, want %s", tc.header, tc.uncached, got, tc.want)
		}
	}
	if got := name(ps.forModel("special"), "vip", 0); got != "only-all" {
		t.Fatalf("a model profile replaces the root wholly: got %s", got)
	}
	if !root.classes[root.explicit["vip"]].queues() || root.classes[2].queues() {
		t.Fatal("queues() must follow the busy thresholds")
	}
}

// TestDeficitRoundRobin: two backlogged classes of equal request cost share dispatches in the
// ratio of their quanta, a carried deficit is spent before the cursor moves on, and an emptied
// class loses its credit.
func TestDeficitRoundRobin(t *testing.T) {
	ps, err := parsePolicies(t, `
default_policy_family: f
uncached_isl_buckets: [{min_tokens: 0, bucket: s}]
policy_classes:
  - {name: a, quantum: 100, prefill_busy_threshold: 1}
  - {name: b, quantum: 300, prefill_busy_threshold: 1}
  - {name: fs, policy_family: f, cache_bucket: s, quantum: 1}
`)
	if err != nil {
		t.Fatal(err)
	}
	prof := ps.root
	t0 := time.Unix(0, 0)
	q := newRouterQueue(t0)
	k := PartitionKey{Model: "m"}
	names := map[*waiter]string{}
	for i, n := range []string{"a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"} {
		class := prof.explicit[n[:1]]
		w := q.park(&SelectRequest{}, false, prof, class, QueueProbe{Partition: k, ISL: 100}, t0.Add(time.Duration(i)))
		names[w] = n
	}
	if got, want := drainOrder(&q, k, names), "a1b1b2b3a2b4a3a4"; got != want {
		t.Fatalf("dispatch order %s, want %s", got, want)
	}
}

// FuzzPolicyConfig: no file panics the parser, and a file it accepts classifies every header
// and uncached count to one of its classes.
func FuzzPolicyConfig(f *testing.F) {
	f.Add([]byte(exampleYAML), "vip", uint64(5000))
	f.Add([]byte("default_policy_family: f\nuncached_isl_buckets: [{min_tokens: 0, bucket: s}]\npolicy_classes: [{name: fs, policy_family: f, cache_bucket: s, quantum: 1}]\n"), "", uint64(0))
	f.Add([]byte("models: {m: {default_policy_family: f, uncached_isl_buckets: [], policy_classes: []}}"), "f", uint64(1))
	f.Add([]byte("[1, 2"), "", uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, header string, uncached uint64) {
		ps, err := ParsePolicies(b)
		if err != nil {
			return
		}
		ps.synthetic = syntheticProfile(&Config{})
		profiles := []*policyProfile{ps.forModel("")}
		for _, p := range ps.models {
			profiles = append(profiles, p)
		}
		for _, p := range profiles {
			if i := p.classify(header, uncached); i < 0 || i >= len(p.classes) {
				t.Fatalf("classify(%q, %d) = %d of %d classes", header, uncached, i, len(p.classes))
			}
		}
	})
}
