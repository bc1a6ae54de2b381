package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// synthMaxBlocks bounds a synthetic trace's expected total of prompt blocks (about 160 MB of
// block ids).
const synthMaxBlocks = 20_000_000

// synthGen draws one synthetic trace. Block ids come from one counter starting at 1, so an id
// names exactly one prefix, as Mooncake's hash_ids do: equal id at equal position ⇒ reusable KV.
type synthGen struct {
	rng  *rand.Rand
	next uint64
}

func (g *synthGen) id() uint64 { g.next++; return g.next }

// ids returns n fresh block ids.
func (g *synthGen) ids(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = g.id()
	}
	return out
}

// logNormal draws a log-normal value with the given mean and σ of the underlying normal,
// rounded and clamped to [lo, hi].
func (g *synthGen) logNormal(mean, sigma float64, lo, hi int) int {
	mu := math.Log(mean) - sigma*sigma/2
	v := int(math.Round(math.Exp(mu + sigma*g.rng.NormFloat64())))
	return max(lo, min(hi, v))
}

func blocksFor(tokens int) int { return (tokens + TraceBlockTokens - 1) / TraceBlockTokens }

// wholeBlocks rounds tokens to a positive multiple of the block size.
func wholeBlocks(tokens int) int {
	return max(1, int(math.Round(float64(tokens)/TraceBlockTokens))) * TraceBlockTokens
}

func (p sysPromptParams) validate() error {
	if est := float64(p.requests) * float64(p.sys+p.user) / TraceBlockTokens; est > synthMaxBlocks {
		return fmt.Errorf("synth: about %.0f prompt blocks, more than the bound of %d", est, synthMaxBlocks)
	}
	return nil
}

// sysprompt draws the sysprompt shape (see SynthPrefix).
func (g *synthGen) sysprompt(p sysPromptParams) []Request {
	sys := make([][]uint64, p.prompts)
	for k := range sys {
		tokens := wholeBlocks(int(float64(p.sys) * (0.5 + g.rng.Float64())))
		sys[k] = g.ids(tokens / TraceBlockTokens)
	}
	zipf := rand.NewZipf(g.rng, p.zipf, 1, uint64(p.prompts-1))
	reqs := make([]Request, 0, p.requests)
	at := 0.0
	for range p.requests {
		at += g.rng.ExpFloat64() / p.rate * 1000
		user := g.logNormal(float64(p.user), 1, 1, synthMaxTokens)
		var prefix []uint64
		if g.rng.Float64() < p.shared {
			prefix = sys[zipf.Uint64()]
		} else {
			user += g.logNormal(float64(p.sys), 0.5, 1, synthMaxTokens)
		}
		input := len(prefix)*TraceBlockTokens + user
		blocks := make([]uint64, 0, blocksFor(input))
		blocks = append(blocks, prefix...)
		blocks = append(blocks, g.ids(blocksFor(input)-len(prefix))...)
		reqs = append(reqs, Request{ArrivalMS: at, Input: input, Output: g.logNormal(float64(p.output), 0.8, 1, synthMaxTokens), Blocks: blocks})
	}
	return reqs
}

func (p agenticParams) validate() error {
	if float64(p.sessions)*float64(p.turns) > synthMaxRequests {
		return fmt.Errorf("synth: sessions × turns = %d × %d exceeds %d requests", p.sessions, p.turns, synthMaxRequests)
	}
	perTurn := float64(p.context) + float64(p.turns)/2*float64(p.growth+p.output)
	if est := float64(p.sessions) * float64(p.turns) * perTurn / TraceBlockTokens; est > synthMaxBlocks {
		return fmt.Errorf("synth: about %.0f prompt blocks, more than the bound of %d", est, synthMaxBlocks)
	}
	return nil
}

// agentic draws the agentic shape (see SynthPrefix). A session keeps the ids of its prompt's
// full blocks; the next turn reuses them and appends fresh ones, and a prompt's partial last
// block gets an id of its own (its content changes once the block fills up).
func (g *synthGen) agentic(p agenticParams) []Request {
	system := []uint64(nil)
	if p.system > 0 {
		system = g.ids(wholeBlocks(p.system) / TraceBlockTokens)
	}
	reqs := make([]Request, 0, p.sessions*p.turns)
	for range p.sessions {
		full := append([]uint64(nil), system...)
		at := g.rng.Float64() * p.stagger * 1000
		input := max(len(system)*TraceBlockTokens+1, int(float64(p.context)*(0.75+0.5*g.rng.Float64())))
		for t := range p.turns {
			if t > 0 {
				at += float64(g.logNormal(p.think*1000, 0.5, 1, math.MaxInt32))
				input += reqs[len(reqs)-1].Output + g.logNormal(float64(p.growth), 1, 1, synthMaxTokens)
			}
			nFull := input / TraceBlockTokens
			for len(full) < nFull {
				full = append(full, g.id())
			}
			blocks := make([]uint64, nFull, blocksFor(input))
			copy(blocks, full)
			if input%TraceBlockTokens != 0 {
				blocks = append(blocks, g.id())
			}
			out := g.logNormal(float64(p.output), 0.8, 1, synthMaxTokens)
			reqs = append(reqs, Request{ArrivalMS: at, Input: input, Output: out, Blocks: blocks})
		}
	}
	return reqs
}
