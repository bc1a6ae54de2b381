//go:build !linux

package engine

// threadCPU is unavailable here; the cpu-ns metrics then read 0.
func threadCPU() int64 { return 0 }

func lockThread() func() { return func() {} }
