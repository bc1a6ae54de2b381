package sim

import (
	"fmt"

	"github.com/kvselect/kvselect/core/engine"
)

// PolicyNames lists the policies RunPolicy knows, in report order. Where each comes from:
//
//	random          Kubernetes Service / kube-proxy random endpoint (policies.go)
//	round-robin     classic round-robin; SGLang router round_robin, Dynamo round-robin mode
//	least-loaded    least outstanding requests by the router's own count (policy_leastloaded.go)
//	prefix-hash     rendezvous hash of the prompt's first blocks (policies.go)
//	max-overlap     longest prefix by KV events alone, llm-d's prefix-only sample profile
//	sglang          SGLang's cache-aware router at its defaults (policy_sglang.go)
//	llm-d           llm-d's precise prefix-cache + KV-utilisation + queue profile (policy_llmd.go)
//	dynamo          Dynamo's KV router cost function: the engine at engine.DefaultConfig
//	kvselect        kvselect's default (KVSelectConfig); kvselect-queue adds the router queue
//	                in wspt order, kvselect-aging in aging order (KVSelectAgingConfig),
//	                kvselect-previous the default before the KV-occupancy term
//	                (KVSelectPreviousConfig), kvselect-central the one before consensus speed
//	                pricing, per-rank β and the pressure term with identical ranks priced at the
//	                partition's central learned speed (KVSelectCentralConfig), kvselect-evict
//	                the default before stickiness with an eviction's recompute priced for
//	                the requests it delays (KVSelectEvictConfig; measured, not adopted),
//	                kvselect-arrival the default with every partition priced as arrival-order
//	                (KVSelectArrivalConfig: the default before reordered-miss pricing)
//
// "sglang-like", the earlier approximation of SGLang's router (it learned a prefix only when
// the worker finished computing it), is accepted as an alias of "sglang".
var PolicyNames = []string{"random", "round-robin", "least-loaded", "prefix-hash", "max-overlap", "sglang", "llm-d", "dynamo", "kvselect", "kvselect-queue", "kvselect-aging", "kvselect-central", "kvselect-previous", "kvselect-evict", "kvselect-arrival"}

// engineConfigs are the policies that are the selection engine at some configuration: Dynamo's
// formula and kvselect's default with its variants.
var engineConfigs = map[string]func() engine.Config{
	"dynamo":            engine.DefaultConfig,
	"kvselect":          KVSelectConfig,
	"kvselect-queue":    KVSelectQueueConfig,
	"kvselect-aging":    KVSelectAgingConfig,
	"kvselect-central":  KVSelectCentralConfig,
	"kvselect-previous": KVSelectPreviousConfig,
	"kvselect-evict":    KVSelectEvictConfig,
	"kvselect-arrival":  KVSelectArrivalConfig,
}

// RunPolicy runs the named policy on reqs.
func RunPolicy(name string, cfg Config, reqs []Request) (Result, error) {
	switch name {
	case "random":
		return Run(cfg, reqs, NewRandom(cfg.Seed), nil)
	case "round-robin":
		return Run(cfg, reqs, NewRoundRobin(), nil)
	case "least-loaded":
		return Run(cfg, reqs, NewLeastLoaded(), nil)
	case "prefix-hash":
		return Run(cfg, reqs, NewPrefixHash(2), nil)
	case "max-overlap":
		p := NewMaxOverlap()
		return Run(cfg, reqs, p, SinkOf(p))
	case "sglang", "sglang-like":
		return Run(cfg, reqs, NewSGLang(cfg.Seed), nil)
	case "llm-d":
		p := NewLLMD(cfg.Seed)
		return Run(cfg, reqs, p, SinkOf(p))
	}
	if config, ok := engineConfigs[name]; ok {
		res, _, err := RunEngine(name, config(), cfg, reqs)
		return res, err
	}
	return Result{}, fmt.Errorf("unknown policy %q (known: %v)", name, PolicyNames)
}

// RunEngine runs the selection engine at configuration ec as policy name on reqs, its workers
// registering what cfg's presets and capacity give them (Config.workerInfos), and returns the
// result with the policy, whose engine a caller may inspect after the run.
func RunEngine(name string, ec engine.Config, cfg Config, reqs []Request) (Result, *EnginePolicy, error) {
	infos, err := cfg.workerInfos()
	if err != nil {
		return Result{}, nil, err
	}
	p, err := NewEnginePolicyForWorkers(name, ec, infos, cfg.Seed)
	if err != nil {
		return Result{}, nil, err
	}
	res, err := Run(cfg, reqs, p, p)
	return res, p, err
}

// KVSelectConfig is the engine configuration of kvselect's default policy.
func KVSelectConfig() engine.Config {
	c := engine.KVSelectDefaults()
	return c
}

// KVSelectQueueConfig is kvselect's policy with the router queue in wspt order
// (DYN_ROUTER_QUEUE_THRESHOLD=1 DYN_ROUTER_QUEUE_POLICY=wspt): a request waits in the router
// while every rank has more than a batch (BatchedTokens) of booked prompt tokens not yet
// prefilled, and the least uncached work goes first.
func KVSelectQueueConfig() engine.Config {
	c := engine.KVSelectDefaults()
	threshold := 1.0
	c.QueueThreshold, c.QueuePolicy = &threshold, "wspt"
	return c
}

// KVSelectAgingConfig is kvselect's policy with the router queue at the same threshold as
// KVSelectQueueConfig (one batch) in kvselect's aging order (router_queue_policy=aging):
// earliest deadline first, a request's deadline being its arrival plus engine.AgingSlowdown
// times its estimated prefill time at the learned speed.
func KVSelectAgingConfig() engine.Config {
	c := KVSelectQueueConfig()
	c.QueuePolicy = engine.QueueAging
	return c
}
