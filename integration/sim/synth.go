package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// SynthPrefix starts a LoadTrace path that names a synthetic workload instead of a file:
//
//	synth:SHAPE?param=value&param=value
//
// e.g. synth:agentic?sessions=48&turns=30&seed=1. Generation is deterministic: the same spec
// gives the same trace on every platform. Unknown shapes and parameters are errors.
//
// Shapes and their parameters (default in brackets; token counts are means unless stated):
//
// sysprompt (alias mooncake) — chat traffic in the spirit of Mooncake's traces whose requests
// share a few long system prompts with Zipf popularity (hot shared prefixes):
//
//	requests [4000]  number of requests
//	rate     [24]    arrivals per second (Poisson)
//	prompts  [16]    distinct system prompts
//	sys      [8192]  system-prompt tokens; each prompt's length is uniform in [sys/2, 3·sys/2],
//	                 whole 512-token blocks
//	zipf     [1.2]   Zipf exponent of system-prompt popularity (> 1; prompt 0 is the hottest)
//	shared   [0.9]   fraction of requests that start with a system prompt; the others are fresh
//	                 prompts of about sys+user tokens
//	user     [1024]  tokens after the system prompt (log-normal, σ = 1)
//	output   [256]   generated tokens (log-normal, σ = 0.8)
//
// agentic — coding-agent sessions: every session starts from a shared system/tool prompt plus
// its own repository context and grows by the model's output and the tool results each turn, so
// a turn's prompt extends the previous one (prefix reuse of all its full blocks):
//
//	sessions [48]    concurrent sessions
//	turns    [30]    turns per session
//	system   [8192]  tokens of the system/tool prompt all sessions share (whole blocks)
//	context  [60000] tokens of a session's first prompt, system prompt included (±25 %)
//	growth   [1500]  tokens appended per turn besides the previous output (log-normal, σ = 1)
//	output   [400]   generated tokens per turn (log-normal, σ = 0.8)
//	think    [30]    seconds from one turn's arrival to the next's (log-normal, σ = 0.5): the
//	                 response, tool execution and the agent's own work, open loop
//	stagger  [60]    sessions start uniformly within this many seconds
//
// With the defaults prompts average about 88K tokens and end near 115K.
//
// mixed — agentic sessions and sysprompt traffic side by side, merged by arrival time. It takes
// every parameter of both; defaults as above except sessions [16] and requests [3000] at
// rate [12].
//
// At these defaults, on 8 workers of 1,000 blocks under today's worker model, round-robin's
// TTFT p99 is already seconds at speedup 1 for agentic (23 s) and mixed (6.5 s), and at
// speedup 3–5 for sysprompt (0.9–2.1 s); agentic at speedup 4 is deep overload.
//
// Every shape takes seed [1].
const SynthPrefix = "synth:"

// Synth generates the synthetic trace named by spec (with or without the synth: prefix).
func Synth(spec string) ([]Request, error) {
	shape, query, _ := strings.Cut(strings.TrimPrefix(spec, SynthPrefix), "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	p := synthParams{q: q, used: map[string]bool{}}
	var reqs []Request
	var sp *sysPromptParams
	var ap *agenticParams
	switch shape {
	case "sysprompt", "mooncake":
		sp = ptr(p.sysprompt(4000, 24))
	case "agentic":
		ap = ptr(p.agentic(48))
	case "mixed":
		ap, sp = ptr(p.agentic(16)), ptr(p.sysprompt(3000, 12))
	default:
		return nil, fmt.Errorf("synth: unknown shape %q (known: sysprompt, mooncake, agentic, mixed)", shape)
	}
	seed := p.uint("seed", 1)
	if err := p.check(); err != nil {
		return nil, err
	}
	g := &synthGen{rng: rand.New(rand.NewPCG(seed, 0x5e7d))}
	if ap != nil {
		if err := ap.validate(); err != nil {
			return nil, err
		}
		reqs = append(reqs, g.agentic(*ap)...)
	}
	if sp != nil {
		if err := sp.validate(); err != nil {
			return nil, err
		}
		reqs = append(reqs, g.sysprompt(*sp)...)
	}
	slices.SortStableFunc(reqs, func(a, b Request) int {
		switch {
		case a.ArrivalMS < b.ArrivalMS:
			return -1
		case a.ArrivalMS > b.ArrivalMS:
			return 1
		}
		return 0
	})
	return reqs, nil
}

// synthParams reads a spec's parameters, remembering which were read and the first bad one.
type synthParams struct {
	q    url.Values
	used map[string]bool
	err  error
}

func (p *synthParams) raw(name string) (string, bool) {
	p.used[name] = true
	v, ok := p.q[name]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

func (p *synthParams) fail(name, v, want string) {
	if p.err == nil {
		p.err = fmt.Errorf("synth: parameter %s=%q: want %s", name, v, want)
	}
}

// int reads an integer in [lo, hi].
func (p *synthParams) int(name string, def, lo, hi int) int {
	v, ok := p.raw(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		p.fail(name, v, fmt.Sprintf("an integer in [%d, %d]", lo, hi))
		return def
	}
	return n
}

// Bounds of the synthetic shapes' parameters: a trace stays within a few million requests and
// each prompt within two million tokens, so a spec cannot exhaust memory by accident.
const (
	synthMaxRequests = 5_000_000
	synthMaxTokens   = 2_000_000
)

func (p *synthParams) uint(name string, def uint64) uint64 {
	v, ok := p.raw(name)
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		p.fail(name, v, "an unsigned integer")
		return def
	}
	return n
}

// float reads a finite number in [lo, hi].
func (p *synthParams) float(name string, def, lo, hi float64) float64 {
	v, ok := p.raw(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < lo || f > hi {
		p.fail(name, v, fmt.Sprintf("a number in [%g, %g]", lo, hi))
		return def
	}
	return f
}

// check reports the first bad parameter, or a parameter the shape does not take.
func (p *synthParams) check() error {
	if p.err != nil {
		return p.err
	}
	var unknown []string
	for name := range p.q {
		if !p.used[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("synth: unknown parameters %v", unknown)
	}
	return nil
}

// sysPromptParams configures the sysprompt shape.
type sysPromptParams struct {
	requests, prompts, sys, user, output int
	rate, zipf, shared                   float64
}

func (p *synthParams) sysprompt(requests int, rate float64) sysPromptParams {
	return sysPromptParams{
		requests: p.int("requests", requests, 1, synthMaxRequests),
		rate:     p.float("rate", rate, 1e-3, 1e6),
		prompts:  p.int("prompts", 16, 1, 1<<20),
		sys:      p.int("sys", 8192, 1, synthMaxTokens),
		zipf:     p.float("zipf", 1.2, 1.0001, 10),
		shared:   p.float("shared", 0.9, 0, 1),
		user:     p.int("user", 1024, 1, synthMaxTokens),
		output:   p.int("output", 256, 1, synthMaxTokens),
	}
}

// agenticParams configures the agentic shape.
type agenticParams struct {
	sessions, turns, system, context, growth, output int
	think, stagger                                   float64
}

func (p *synthParams) agentic(sessions int) agenticParams {
	return agenticParams{
		sessions: p.int("sessions", sessions, 1, synthMaxRequests),
		turns:    p.int("turns", 30, 1, synthMaxRequests),
		system:   p.int("system", 8192, 0, synthMaxTokens),
		context:  p.int("context", 60000, 1, synthMaxTokens),
		growth:   p.int("growth", 1500, 1, synthMaxTokens),
		output:   p.int("output", 400, 1, synthMaxTokens),
		think:    p.float("think", 30, 0, 86400),
		stagger:  p.float("stagger", 60, 0, 86400),
	}
}

func ptr[T any](v T) *T { return &v }
