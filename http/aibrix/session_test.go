package aibrix

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestMemorySessionStoreTTL(t *testing.T) {
	s := NewMemorySessionStore(0)
	t0 := time.Unix(1_000_000, 0)
	k := SessionKey{Model: "m", Value: "s1"}
	if _, ok := s.Get(k, t0); ok {
		t.Fatal("empty store returned a binding")
	}
	s.Bind(k, Binding{"ns/a", 8001}, time.Minute, t0)
	if b, ok := s.Get(k, t0.Add(59*time.Second)); !ok || b != (Binding{"ns/a", 8001}) {
		t.Fatalf("Get before expiry = %v, %v", b, ok)
	}
	if _, ok := s.Get(SessionKey{Model: "other", Value: "s1"}, t0); ok {
		t.Fatal("sessions must be scoped by model")
	}
	// Refresh extends the TTL from the new now.
	s.Bind(k, Binding{"ns/a", 8001}, time.Minute, t0.Add(50*time.Second))
	if _, ok := s.Get(k, t0.Add(100*time.Second)); !ok {
		t.Fatal("refreshed binding expired early")
	}
	if _, ok := s.Get(k, t0.Add(110*time.Second)); ok {
		t.Fatal("binding outlived its TTL")
	}
	if s.Len() != 0 {
		t.Fatalf("expired entry not dropped on Get: len %d", s.Len())
	}
	s.Bind(k, Binding{"ns/a", 8001}, time.Minute, t0)
	s.Bind(k, Binding{}, 0, t0)
	if _, ok := s.Get(k, t0); ok {
		t.Fatal("ttl <= 0 must remove the binding")
	}
}

func TestMemorySessionStoreBounded(t *testing.T) {
	s := NewMemorySessionStore(8)
	t0 := time.Unix(0, 0)
	for i := 0; i < 100; i++ {
		s.Bind(SessionKey{"m", fmt.Sprint(i)}, Binding{"ns/a", 1}, time.Hour, t0)
		if s.Len() > 8 {
			t.Fatalf("store grew to %d > 8", s.Len())
		}
	}
	last := SessionKey{"m", "99"}
	if _, ok := s.Get(last, t0); !ok {
		t.Fatal("the newest binding must be kept")
	}
	// Expired entries are swept before live ones are evicted.
	s2 := NewMemorySessionStore(4)
	for i := 0; i < 3; i++ {
		s2.Bind(SessionKey{"m", fmt.Sprint(i)}, Binding{"ns/a", 1}, time.Second, t0)
	}
	s2.Bind(SessionKey{"m", "live"}, Binding{"ns/b", 1}, time.Hour, t0)
	s2.Bind(SessionKey{"m", "new"}, Binding{"ns/c", 1}, time.Hour, t0.Add(time.Minute))
	for _, k := range []string{"live", "new"} {
		if _, ok := s2.Get(SessionKey{"m", k}, t0.Add(time.Minute)); !ok {
			t.Fatalf("live binding %q evicted while expired ones existed", k)
		}
	}
}

func TestMemorySessionStoreConcurrent(t *testing.T) {
	s := NewMemorySessionStore(64)
	t0 := time.Unix(0, 0)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				k := SessionKey{"m", fmt.Sprint(i % 100)}
				s.Bind(k, Binding{"ns/a", g + 1}, time.Minute, t0)
				s.Get(k, t0)
			}
		}()
	}
	wg.Wait()
	if s.Len() > 64 {
		t.Fatalf("len %d exceeds bound", s.Len())
	}
}
