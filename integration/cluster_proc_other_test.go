//go:build !linux

package integration

import "os/exec"

// setDeathSignal is a no-op where the kernel offers no parent-death signal; t.Cleanup still
// kills every child.
func setDeathSignal(*exec.Cmd) {}
