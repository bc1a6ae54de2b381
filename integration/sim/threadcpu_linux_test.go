//go:build linux

package sim

import (
	"runtime"
	"syscall"
)

// threadCPU returns the calling OS thread's user+system CPU time in nanoseconds (as the engine's
// fast-path benchmarks measure it): on the shared build machine wall time includes waiting for a
// core, and process time the garbage collector's background workers.
func threadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// lockThread pins the benchmark goroutine to its OS thread (threadCPU measures that thread).
func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
