//go:build linux

package threadcpu

import (
	"runtime"
	"syscall"
)

func now() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func lock() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
