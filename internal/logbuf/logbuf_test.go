package logbuf

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentWrites: writers on several goroutines lose nothing (run under -race).
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				fmt.Fprintf(&b, "g%d-%d;", g, i)
				_ = b.Count(";")
			}
		})
	}
	wg.Wait()
	if n := b.Count(";"); n != 800 {
		t.Fatalf("%d records, want 800", n)
	}
}
