package fleet

import "testing"

// BenchmarkEngineSteps replays a shared-prefix workload through one 8B engine with a small
// cache (preemptions included) and reports the cost per engine step.
func BenchmarkEngineSteps(b *testing.B) {
	spec, _ := Preset(PresetH100_8B)
	arr := randomArrivals(1, 2000)
	for i := range arr {
		r := *arr[i].r
		r.Prompt, r.Output = r.Prompt*50, r.Output*5 // 10-token ids stand for 512-token blocks
		arr[i].r = &r
		arr[i].at *= 20
	}
	steps := 0
	b.ResetTimer()
	for range b.N {
		w := New(spec, 512, 400)
		var buf []Event
		next := 0
		for {
			t := w.NextAt()
			if next < len(arr) && arr[next].at <= t {
				buf = w.Submit(arr[next].at, arr[next].r, buf[:0])
				next++
				continue
			}
			if t == inf {
				break
			}
			buf = w.Advance(buf[:0])
			steps++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(1, steps)), "ns/step")
}
