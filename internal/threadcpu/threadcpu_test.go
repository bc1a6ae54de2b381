//go:build linux

package threadcpu

import "testing"

// TestNowCountsThisThreadsWork: a thread that spins for a while has spent CPU time by Now's
// account, and Now never goes backwards.
func TestNowCountsThisThreadsWork(t *testing.T) {
	defer Lock()()
	t0 := Now()
	x := 0
	for i := range 50_000_000 {
		x += i & 7
	}
	t1 := Now()
	if x == 0 || !(t1 > t0) {
		t.Fatalf("thread CPU %d → %d ns over a busy loop", t0, t1)
	}
}
