// Package threadcpu measures the CPU time of the calling OS thread, for benchmarks that report
// it beside wall time: on a shared build machine wall time includes waiting for a core, and
// process CPU time includes the garbage collector's background workers. A benchmark locks its
// goroutine to its thread (Lock) and reads Now before and after its loop.
package threadcpu

// Lock pins the calling goroutine to its OS thread (the thread Now measures) and returns the
// function that releases it.
func Lock() func() { return lock() }

// Now returns the calling OS thread's user + system CPU time in nanoseconds; 0 where the
// platform does not report it (the metric then reads 0).
func Now() int64 { return now() }
