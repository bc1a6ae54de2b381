//go:build linux

package integration

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel SIGKILL the child if the test binary dies without running
// its cleanups (a panic, a timeout, go test killed): the last guard against leaked processes.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
