package sim

import "testing"

// FuzzSynth: any spec either fails cleanly or yields a trace that keeps the trace contract
// (sorted arrivals, positive sizes, one block per 512 prompt tokens).
func FuzzSynth(f *testing.F) {
	for _, s := range []string{
		"synth:agentic?sessions=2&turns=3",
		"synth:sysprompt?requests=20&prompts=2&zipf=2",
		"synth:mixed?sessions=1&turns=2&requests=5&rate=0.5",
		"synth:agentic?system=0&context=1&growth=1&output=1&turns=2&sessions=1",
		"synth:mooncake?requests=3&shared=0",
		"synth:agentic?sessions=1;turns=2",
		"synth:?",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if len(spec) > 160 {
			return
		}
		reqs, err := Synth(spec)
		if err != nil {
			return
		}
		if len(reqs) > 200_000 {
			return // large but valid: the contract is checked on smaller ones
		}
		for i, r := range reqs {
			if r.Input <= 0 || r.Output <= 0 || len(r.Blocks) != blocksFor(r.Input) {
				t.Fatalf("%q request %d: input %d output %d blocks %d", spec, i, r.Input, r.Output, len(r.Blocks))
			}
			if i > 0 && r.ArrivalMS < reqs[i-1].ArrivalMS {
				t.Fatalf("%q: arrivals out of order at %d", spec, i)
			}
		}
	})
}
