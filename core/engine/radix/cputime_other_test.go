//go:build !unix

package radix

// processCPU is unavailable here; the cpu-ns metrics then read 0.
func processCPU() int64 { return 0 }
