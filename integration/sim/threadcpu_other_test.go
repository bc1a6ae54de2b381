//go:build !linux

package sim

// threadCPU is unavailable here; the thread-cpu-ns metric then reads 0.
func threadCPU() int64 { return 0 }

func lockThread() func() { return func() {} }
