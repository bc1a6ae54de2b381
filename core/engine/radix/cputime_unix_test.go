//go:build unix

package radix

import "syscall"

// processCPU returns the process's user+system CPU time in nanoseconds. Benchmarks report CPU
// time per op next to wall time because the build machine is shared and wall time there
// includes waiting for a core.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
