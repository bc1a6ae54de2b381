package bus

import (
	"testing"
	"time"
)

func TestLogLimiterWindow(t *testing.T) {
	l := NewLogLimiter(3, time.Second)
	t0 := time.Unix(1000, 0)
	for i := range 3 {
		if ok, sup := l.Allow(t0.Add(time.Duration(i) * time.Millisecond)); !ok || sup != 0 {
			t.Fatalf("line %d: ok=%v suppressed=%d", i, ok, sup)
		}
	}
	for i := range 5 {
		if ok, _ := l.Allow(t0.Add(500 * time.Millisecond)); ok {
			t.Fatalf("line %d over budget passed", 3+i)
		}
	}
	ok, sup := l.Allow(t0.Add(time.Second))
	if !ok || sup != 5 {
		t.Fatalf("first line of the next window: ok=%v suppressed=%d, want true 5", ok, sup)
	}
	if l.Suppressed() != 5 {
		t.Fatalf("Suppressed() = %d", l.Suppressed())
	}
}
