package sim

import (
	"fmt"
	"math"
	"strconv"
)

// MatrixLoad is one load of a matrix group: an arrival-rate speedup and how it was found.
type MatrixLoad struct {
	// Name is "p99+1s"-style for a target load (round-robin's p99 is its idle p99 plus the
	// target), "overload" for the overload point.
	Name    string  `json:"name"`
	Speedup float64 `json:"speedup"`
	// Strict marks a "seconds" load, where the strict bar applies.
	Strict bool `json:"strict"`
	// TargetMS is the round-robin p99 the search aimed at, idle p99 included (0 for the
	// overload point).
	TargetMS float64 `json:"target_ms,omitempty"`
	// RoundRobinP99MS is round-robin's TTFT p99 at Speedup, as the search measured it.
	RoundRobinP99MS float64 `json:"round_robin_p99_ms"`
	// SpanS is how long the workload's arrivals last at Speedup (a windowed workload's mean
	// window): a span of a few seconds or less means the load is one burst.
	SpanS float64 `json:"span_s"`
}

// Bounds of the load search: a group whose round-robin p99 stays below a target even at
// searchMaxSpeedup has no such load (the trace is too short or too light to queue); the p99 at
// searchMinSpeedup is the idle fleet's.
const (
	searchMinSpeedup = 1.0 / 256
	searchMaxSpeedup = 4096
)

// round3 rounds s to three significant digits, so that every searched speedup prints
// exactly (strconv 'g' round-trips it) in a reproduction command.
func round3(s float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(s, 'g', 3, 64), 64)
	return v
}

// loadProbe measures round-robin's p99 at a speedup, remembering every measurement so that
// the searches for successive targets share them.
type loadProbe struct {
	measure func(speedup float64) (float64, error)
	seen    map[float64]float64
	runs    int
}

func (p *loadProbe) p99(s float64) (float64, error) {
	if v, ok := p.seen[s]; ok {
		return v, nil
	}
	v, err := p.measure(s)
	if err != nil {
		return 0, err
	}
	if p.seen == nil {
		p.seen = map[float64]float64{}
	}
	p.seen[s] = v
	p.runs++
	return v, nil
}

// searchSpeedup finds the smallest speedup s, to a relative precision tol, at which the
// probe's p99 reaches target: p99(s) ≥ target and p99(s′) < target for the searched s′ just
// below (s′ ≥ s/(1+tol)), unless s is the search's lower bound. It brackets the crossing by
// halving or doubling from start, then bisects geometrically; every probed speedup has three
// significant digits. ok is false when the target is not reached below searchMaxSpeedup. The
// p99 need not be monotone in the speedup: the answer is then a crossing, not necessarily the
// first one, and the same for every run.
func searchSpeedup(p *loadProbe, target, start, tol float64) (s, p99 float64, ok bool, err error) {
	s = round3(min(max(start, searchMinSpeedup), searchMaxSpeedup))
	v, err := p.p99(s)
	if err != nil {
		return 0, 0, false, err
	}
	lo, hi := 0.0, 0.0 // p99(lo) < target ≤ p99(hi); lo 0 means "at the lower bound"
	if v >= target {
		hi = s
		for {
			next := round3(hi / 2)
			if next < searchMinSpeedup {
				break
			}
			if v, err = p.p99(next); err != nil {
				return 0, 0, false, err
			}
			if v < target {
				lo = next
				break
			}
			hi = next
		}
	} else {
		lo = s
		for {
			next := round3(lo * 2)
			if next > searchMaxSpeedup {
				return 0, 0, false, nil
			}
			if v, err = p.p99(next); err != nil {
				return 0, 0, false, err
			}
			if v >= target {
				hi = next
				break
			}
			lo = next
		}
	}
	for lo > 0 && hi/lo > 1+tol {
		mid := round3(math.Sqrt(lo * hi))
		if mid <= lo || mid >= hi {
			break
		}
		if v, err = p.p99(mid); err != nil {
			return 0, 0, false, err
		}
		if v >= target {
			hi = mid
		} else {
			lo = mid
		}
	}
	p99, err = p.p99(hi)
	return hi, p99, true, err
}

// findLoads runs the searches of one group. It first measures round-robin's p99 on an idle
// fleet (at searchMinSpeedup): with ~100K-token prompts a cold prefill alone takes seconds, so
// "round-robin's p99 is seconds" must mean seconds of queueing to tell loads apart. Each target
// t then gives the load where round-robin's p99 first reaches idle + t (a target not reached is
// left out and named in missing), and the overload point is overload × the last load found
// (overload ≤ 0: none).
func findLoads(p *loadProbe, targets []float64, overload, tol float64) (loads []MatrixLoad, idle float64, missing []string, err error) {
	if idle, err = p.p99(round3(searchMinSpeedup)); err != nil {
		return nil, 0, nil, err
	}
	start := 1.0
	for _, t := range targets {
		name := "p99+" + formatSeconds(t)
		s, v, ok, err := searchSpeedup(p, idle+t, start, tol)
		if err != nil {
			return nil, 0, nil, err
		}
		if !ok {
			missing = append(missing, name)
			continue
		}
		if n := len(loads); n > 0 && loads[n-1].Speedup == s {
			// The p99 jumps past both targets at once: one cell serves both, under both
			// names and the higher target.
			loads[n-1].Name += "," + name
			loads[n-1].TargetMS = idle + t
			continue
		}
		loads = append(loads, MatrixLoad{Name: name, Speedup: s, Strict: true, TargetMS: idle + t, RoundRobinP99MS: v})
		start = s
	}
	if overload > 0 && len(loads) > 0 {
		s := round3(loads[len(loads)-1].Speedup * overload)
		v, err := p.p99(s)
		if err != nil {
			return nil, 0, nil, err
		}
		loads = append(loads, MatrixLoad{Name: "overload", Speedup: s, RoundRobinP99MS: v})
	}
	return loads, idle, missing, nil
}

// formatSeconds prints a millisecond target as seconds: 1000 → "1s", 2500 → "2.5s".
func formatSeconds(ms float64) string {
	return fmt.Sprintf("%ss", strconv.FormatFloat(ms/1000, 'g', -1, 64))
}
