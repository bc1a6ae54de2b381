package fleet

import (
	"fmt"
	"strings"
)

// MixSeparator joins preset names into the name of a mixed fleet: "h100-8b+a100-8b" is a fleet
// whose workers alternate between the two presets.
const MixSeparator = "+"

// Mix resolves a fleet name: one preset name (Preset; "" is DefaultPreset) or several joined by
// MixSeparator. Worker i of a fleet runs the (i mod k)-th of its k specs, so a fleet of 8 named
// "h100-8b+a100-8b" has four H100 and four A100 workers, interleaved; a name repeated weights
// it ("h100-8b+h100-8b+a100-8b": two of every three workers are H100s). A mix serves one
// model, as a partition of a real fleet does, on engines that differ in speed, batch limits
// and KV capacity: what a fleet grown over GPU generations looks like to its router.
func Mix(name string) ([]Spec, error) {
	if !strings.Contains(name, MixSeparator) {
		sp, err := Preset(name)
		if err != nil {
			return nil, err
		}
		return []Spec{sp}, nil
	}
	parts := strings.Split(name, MixSeparator)
	out := make([]Spec, 0, len(parts))
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("fleet: empty preset name in mix %q", name)
		}
		sp, err := Preset(p)
		if err != nil {
			return nil, err
		}
		if sp.Legacy {
			return nil, fmt.Errorf("fleet: preset %q cannot be mixed (its timing is not a step model)", p)
		}
		out = append(out, sp)
	}
	return out, nil
}

// MixNumBlocks is the smallest KV capacity, in blocks of bs tokens, of a mix's specs: a capacity
// every worker of the fleet can hold.
func MixNumBlocks(specs []Spec, bs int) int {
	n := 0
	for i, sp := range specs {
		if b := sp.NumBlocks(bs); i == 0 || b < n {
			n = b
		}
	}
	return max(n, 1)
}
