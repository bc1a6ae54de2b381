package sim

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestSynthDeterministic(t *testing.T) {
	for _, spec := range []string{
		"synth:sysprompt?requests=300&seed=5",
		"synth:agentic?sessions=6&turns=5&seed=5",
		"synth:mixed?sessions=3&turns=4&requests=100&seed=5",
	} {
		a, err := LoadTrace(spec, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := LoadTrace(spec, 0)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: two generations differ", spec)
		}
		c, _ := LoadTrace(strings.Replace(spec, "seed=5", "seed=6", 1), 0)
		if reflect.DeepEqual(a, c) {
			t.Fatalf("%s: seeds 5 and 6 give the same trace", spec)
		}
		if !slices.IsSortedFunc(a, func(x, y Request) int { return cmp.Compare(x.ArrivalMS, y.ArrivalMS) }) {
			t.Fatalf("%s: arrivals not sorted", spec)
		}
		checkPrefixIDs(t, spec, a)
	}
}

// checkPrefixIDs checks the trace contract the simulator's caches rely on: an id names one
// prefix (equal id ⇒ equal position and equal preceding ids), every block count fits the prompt.
func checkPrefixIDs(t *testing.T, spec string, reqs []Request) {
	t.Helper()
	type pos struct {
		at     int
		parent uint64
	}
	seen := map[uint64]pos{}
	for i, r := range reqs {
		if r.Input <= 0 || r.Output <= 0 || len(r.Blocks) != blocksFor(r.Input) {
			t.Fatalf("%s: request %d: input %d output %d with %d blocks", spec, i, r.Input, r.Output, len(r.Blocks))
		}
		for k, b := range r.Blocks {
			var parent uint64
			if k > 0 {
				parent = r.Blocks[k-1]
			}
			if p, ok := seen[b]; ok && p != (pos{k, parent}) {
				t.Fatalf("%s: block %d at position %d after %d, earlier at %d after %d", spec, b, k, parent, p.at, p.parent)
			}
			seen[b] = pos{k, parent}
		}
	}
}

func TestSynthAgenticShape(t *testing.T) {
	reqs, err := LoadTrace("synth:agentic?sessions=4&turns=10&context=20000&system=4096&think=5&stagger=0&seed=2", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 40 {
		t.Fatalf("%d requests, want 4 × 10", len(reqs))
	}
	// Group turns into sessions: a turn's full blocks extend its predecessor's.
	var sessions [][]Request
	for _, r := range reqs {
		placed := false
		for i, s := range sessions {
			prev := s[len(s)-1]
			full := prev.Input / TraceBlockTokens
			if len(r.Blocks) > full && full > 8 && slices.Equal(r.Blocks[:full], prev.Blocks[:full]) {
				if r.Input <= prev.Input+prev.Output || r.ArrivalMS <= prev.ArrivalMS {
					t.Fatalf("turn does not grow by the previous output or arrives out of order")
				}
				sessions[i] = append(s, r)
				placed = true
				break
			}
		}
		if !placed {
			sessions = append(sessions, []Request{r})
		}
	}
	if len(sessions) != 4 {
		t.Fatalf("%d sessions recognised, want 4", len(sessions))
	}
	for _, s := range sessions {
		if len(s) != 10 {
			t.Fatalf("session of %d turns, want 10", len(s))
		}
		// Every session starts with the shared 8-block system prompt, and its first prompt is
		// the context size ± 25 %.
		if !slices.Equal(s[0].Blocks[:8], sessions[0][0].Blocks[:8]) {
			t.Fatal("sessions do not share the system prompt")
		}
		if s[0].Input < 15000 || s[0].Input > 25000 {
			t.Fatalf("first prompt %d tokens, want 20000 ± 25 %%", s[0].Input)
		}
	}
	if IdealHitRate(reqs) < 0.8 {
		t.Fatalf("ideal hit rate %.2f: growing sessions should reuse most of each prompt", IdealHitRate(reqs))
	}
}

func TestSynthSyspromptShape(t *testing.T) {
	reqs, err := LoadTrace("synth:sysprompt?requests=4000&prompts=8&sys=4096&zipf=1.5&shared=0.75&rate=10&seed=3", 0)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[uint64]int{} // first block → requests
	fresh := 0
	for _, r := range reqs {
		counts[r.Blocks[0]]++
	}
	var shared []int
	for _, n := range counts {
		if n > 1 {
			shared = append(shared, n)
		} else {
			fresh++
		}
	}
	slices.Sort(shared)
	if len(shared) > 8 || len(shared) < 5 {
		t.Fatalf("%d shared prefixes, want up to 8 (all but the rarest drawn)", len(shared))
	}
	// Zipf 1.5: the hottest prompt takes far more than an equal share of the shared requests.
	total := 0
	for _, n := range shared {
		total += n
	}
	if hot := shared[len(shared)-1]; float64(hot) < 0.4*float64(total) {
		t.Fatalf("hottest prefix has %d of %d shared requests, want ≥ 40 %%", hot, total)
	}
	if f := float64(fresh) / float64(len(reqs)); f < 0.2 || f > 0.3 {
		t.Fatalf("fresh fraction %.3f, want about 0.25", f)
	}
	// Poisson arrivals at 10/s: 4000 requests in about 400 s.
	if span := reqs[len(reqs)-1].ArrivalMS / 1000; span < 360 || span > 440 {
		t.Fatalf("span %.0f s, want about 400", span)
	}
}

func TestSynthSpecErrors(t *testing.T) {
	for _, spec := range []string{
		"synth:nope",
		"synth:agentic?sessionz=3",
		"synth:agentic?sessions=0",
		"synth:agentic?sessions=x",
		"synth:sysprompt?zipf=1",
		"synth:sysprompt?shared=2",
		"synth:sysprompt?rate=NaN",
		"synth:agentic?sessions=100000&turns=100000",
		"synth:agentic?sessions=5000&turns=1000&context=2000000",
		"synth:sysprompt?requests=%zz",
		"synth:sysprompt?prompts=3&sessions=2", // sessions belongs to agentic
	} {
		if _, err := LoadTrace(spec, 0); err == nil {
			t.Errorf("%s: no error", spec)
		}
	}
	reqs, err := LoadTrace("synth:mixed?sessions=2&turns=3&requests=10", 5)
	if err != nil || len(reqs) != 5 {
		t.Fatalf("limit: %d requests, %v", len(reqs), err)
	}
	if _, err := LoadTrace("synth:mooncake?prompts=1&requests=50", 0); err != nil {
		t.Fatalf("one system prompt: %v", err)
	}
}
