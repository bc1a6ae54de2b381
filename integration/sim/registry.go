package sim

import (
	"fmt"

	"github.com/kvselect/kvselect/core/engine"
)

// PolicyNames lists the policies RunPolicy knows, in report order.
var PolicyNames = []string{"random", "round-robin", "least-loaded", "prefix-hash", "max-overlap", "sglang-like", "dynamo", "kvselect", "kvselect-queue"}

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
		return Run(cfg, reqs, NewMaxOverlap(), nil)
	case "sglang-like":
		return Run(cfg, reqs, NewSGLangLike(), nil)
	case "dynamo", "kvselect", "kvselect-queue":
		ec := engine.DefaultConfig()
		switch name {
		case "kvselect":
			ec = KVSelectConfig()
		case "kvselect-queue":
			ec = KVSelectQueueConfig()
		}
		sp, capacity, err := cfg.spec()
		if err != nil {
			return Result{}, err
		}
		info := WorkerInfo{BlockSize: TraceBlockTokens, TotalKVBlocks: capacity, MaxNumBatchedTokens: sp.MaxNumBatchedTokens, MaxNumSeqs: sp.MaxNumSeqs}
		p, err := NewEnginePolicyFor(name, ec, info, cfg.Workers, cfg.Seed)
		if err != nil {
			return Result{}, err
		}
		return Run(cfg, reqs, p, p)
	}
	return Result{}, fmt.Errorf("unknown policy %q (known: %v)", name, PolicyNames)
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
