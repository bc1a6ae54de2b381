package core

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus"
)

// Pure tests of the AIBrix session table (aibrix_sessions.go): version rules against explicit
// event sequences, TTL expiry at explicit times, the refresh publication rate, the entry bound,
// and a convergence property against a naive "highest version wins" reference.

// at returns the instant base+d (tests never read the clock).
func at(d time.Duration) time.Time { return time.Unix(1_700_000_000, 0).Add(d) }

var (
	keyA = AIBrixSessionKey{Model: "llama", Session: "user-1"}
	keyB = AIBrixSessionKey{Model: "llama", Session: "user-2"}
	podX = AIBrixTarget{Candidate: "default/pod-x", Port: 8000}
	podY = AIBrixTarget{Candidate: "default/pod-y", Port: 8001}
)

// recorder collects published events.
type recorder struct{ evs []AIBrixSessionEvent }

func (r *recorder) publish(ev *AIBrixSessionEvent) { r.evs = append(r.evs, *ev) }

// peerEv is a peer's binding of keyA.
func peerEv(t AIBrixTarget, seq, writer uint64, ttl time.Duration) *AIBrixSessionEvent {
	return &AIBrixSessionEvent{Key: keyA, Target: t, TTL: ttl, Sequence: seq, Writer: writer, Sender: "peer"}
}

// TestAIBrixSessionsApplyVersions walks the §8 merge rule one step at a time: each step applies
// one peer event at an explicit time and checks whether it was taken and what Get then sees.
func TestAIBrixSessionsApplyVersions(t *testing.T) {
	const ttl = 10 * time.Second
	type step struct {
		ev      *AIBrixSessionEvent
		now     time.Duration
		applied bool
		want    *AIBrixTarget // expected Get(keyA) at now; nil = none
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"vacant inserts", []step{
			{peerEv(podX, 5, 1, ttl), 0, true, &podX},
		}},
		{"newer sequence replaces", []step{
			{peerEv(podX, 5, 1, ttl), 0, true, &podX},
			{peerEv(podY, 6, 1, ttl), 1, true, &podY},
		}},
		{"older sequence ignored", []step{
			{peerEv(podX, 5, 1, ttl), 0, true, &podX},
			{peerEv(podY, 4, 9, ttl), 1, false, &podX},
		}},
		{"tie on sequence goes to the higher writer", []step{
			{peerEv(podX, 5, 1, ttl), 0, true, &podX},
			{peerEv(podY, 5, 2, ttl), 1, true, &podY},
			{peerEv(podX, 5, 1, ttl), 2, false, &podY},
		}},
		{"same version, other target ignored", []step{
			{peerEv(podX, 5, 1, ttl), 0, true, &podX},
			{peerEv(podY, 5, 1, ttl), 1, false, &podX},
		}},
		{"same target and version refreshes the deadline", []step{
			{peerEv(podX, 5, 1, ttl), 0, true, &podX},
			{peerEv(podX, 5, 1, ttl), 8 * time.Second, true, &podX},
			{nil, 17 * time.Second, false, &podX}, // alive only thanks to the refresh
			{nil, 18 * time.Second, false, nil},
		}},
		{"a delayed refresh never shortens the deadline", []step{
			{peerEv(podX, 5, 1, time.Minute), 0, true, &podX},
			{peerEv(podX, 5, 1, time.Second), 1 * time.Second, true, &podX},
			{nil, 30 * time.Second, false, &podX},
		}},
		{"expired binding replaced by an older version", []step{
			{peerEv(podX, 5, 1, ttl), 0, true, &podX},
			{peerEv(podY, 1, 1, ttl), ttl, true, &podY},
		}},
		{"removal with the same version", []step{
			{peerEv(podX, 5, 1, ttl), 0, true, &podX},
			{peerEv(podX, 5, 1, 0), 1, true, nil},
		}},
		{"removal with an older version ignored", []step{
			{peerEv(podX, 5, 1, ttl), 0, true, &podX},
			{peerEv(podX, 4, 1, 0), 1, false, &podX},
		}},
		{"removal of nothing ignored", []step{
			{peerEv(podX, 5, 1, 0), 0, false, nil},
		}},
		{"event without candidate ignored", []step{
			{peerEv(AIBrixTarget{Port: 1}, 9, 9, ttl), 0, false, nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewAIBrixSessions(AIBrixSessionConfig{}, 100, nil)
			for i, st := range tt.steps {
				if st.ev != nil {
					if got := s.Apply(st.ev, at(st.now)); got != st.applied {
						t.Fatalf("step %d: Apply = %v, want %v", i, got, st.applied)
					}
				}
				got, ok := s.Get(keyA, at(st.now))
				switch {
				case st.want == nil && ok:
					t.Fatalf("step %d: Get = %+v, want none", i, got)
				case st.want != nil && (!ok || got != *st.want):
					t.Fatalf("step %d: Get = %+v, %v; want %+v", i, got, ok, *st.want)
				}
			}
		})
	}
}

// TestAIBrixSessionsExpiry: a binding is live strictly before now+ttl and gone at it.
func TestAIBrixSessionsExpiry(t *testing.T) {
	s := NewAIBrixSessions(AIBrixSessionConfig{}, 1, nil)
	s.Bind(keyA, podX, time.Minute, at(0))
	if got, ok := s.Get(keyA, at(time.Minute-time.Nanosecond)); !ok || got != podX {
		t.Fatalf("just before expiry: %+v, %v", got, ok)
	}
	if _, ok := s.Get(keyA, at(time.Minute)); ok {
		t.Fatal("binding live at its deadline")
	}
	if n := s.Stats().Entries; n != 0 {
		t.Fatalf("expired entry kept by Get: %d entries", n)
	}
	// A huge TTL saturates rather than wrapping into the past.
	s.Bind(keyA, podX, time.Duration(math.MaxInt64), at(0))
	if _, ok := s.Get(keyA, at(100*365*24*time.Hour)); !ok {
		t.Fatal("binding with a huge TTL expired (deadline wrapped)")
	}
	s.Bind(keyA, podX, 0, at(0))
	// Sweep reclaims expired entries without a Get.
	s.Bind(keyA, podX, time.Second, at(0))
	s.Bind(keyB, podY, time.Hour, at(0))
	if n := s.Sweep(at(time.Second)); n != 1 {
		t.Fatalf("Sweep = %d, want 1", n)
	}
	if _, ok := s.Get(keyB, at(time.Second)); !ok {
		t.Fatal("Sweep dropped a live binding")
	}
}

// TestAIBrixSessionsBindVersions: local binds publish new versions only on a change, a refresh
// keeps the version, and a local rebind supersedes every version seen from peers even when
// the peer's clock is ahead.
func TestAIBrixSessionsBindVersions(t *testing.T) {
	const ttl = 40 * time.Second
	var rec recorder
	s := NewAIBrixSessions(AIBrixSessionConfig{}, 7, rec.publish)

	s.Bind(keyA, podX, ttl, at(0))
	if len(rec.evs) != 1 {
		t.Fatalf("first bind published %d events", len(rec.evs))
	}
	first := rec.evs[0]
	if first.Writer != 7 || first.Sequence != uint64(at(0).UnixNano()) || first.Target != podX || first.TTL != ttl {
		t.Fatalf("first bind event %+v", first)
	}

	// Refreshes within ttl/4 publish nothing; the first one at ttl/4 republishes the same version.
	s.Bind(keyA, podX, ttl, at(time.Second))
	s.Bind(keyA, podX, ttl, at(9*time.Second))
	if len(rec.evs) != 1 {
		t.Fatalf("refresh within ttl/4 published: %+v", rec.evs[1:])
	}
	s.Bind(keyA, podX, ttl, at(10*time.Second))
	if len(rec.evs) != 2 || rec.evs[1].Sequence != first.Sequence || rec.evs[1].Writer != 7 {
		t.Fatalf("refresh at ttl/4: %+v", rec.evs)
	}

	// A peer whose clock runs an hour ahead moves the session; our next move must beat it.
	ahead := uint64(at(time.Hour).UnixNano())
	if !s.Apply(&AIBrixSessionEvent{Key: keyA, Target: podY, TTL: ttl, Sequence: ahead, Writer: 3}, at(11*time.Second)) {
		t.Fatal("newer peer binding not applied")
	}
	s.Bind(keyA, podX, ttl, at(12*time.Second))
	last := rec.evs[len(rec.evs)-1]
	if last.Sequence <= ahead || last.Target != podX {
		t.Fatalf("local rebind %+v does not supersede peer sequence %d", last, ahead)
	}

	// Refreshing a peer's binding republishes the peer's version, not a new one.
	s.Apply(&AIBrixSessionEvent{Key: keyB, Target: podY, TTL: ttl, Sequence: ahead + 100, Writer: 3}, at(13*time.Second))
	n := len(rec.evs)
	s.Bind(keyB, podY, ttl, at(30*time.Second))
	if len(rec.evs) != n+1 || rec.evs[n].Sequence != ahead+100 || rec.evs[n].Writer != 3 {
		t.Fatalf("refresh of a peer binding published %+v", rec.evs[n:])
	}

	// A non-positive TTL removes locally and publishes a removal with a new version.
	s.Bind(keyA, podX, 0, at(31*time.Second))
	rm := rec.evs[len(rec.evs)-1]
	if rm.TTL != 0 || rm.Sequence <= last.Sequence || rm.Target != podX {
		t.Fatalf("removal event %+v", rm)
	}
	if _, ok := s.Get(keyA, at(31*time.Second)); ok {
		t.Fatal("removed binding still live")
	}
	// An empty candidate removes locally without publishing (it cannot name its target).
	n = len(rec.evs)
	s.Bind(keyB, AIBrixTarget{}, ttl, at(32*time.Second))
	if _, ok := s.Get(keyB, at(32*time.Second)); ok || len(rec.evs) != n {
		t.Fatalf("empty candidate: live=%v, published %d", ok, len(rec.evs)-n)
	}
	st := s.Stats()
	if st.Binds != 2 || st.Refreshes != 4 || st.Published != uint64(len(rec.evs)) {
		t.Fatalf("stats %+v with %d events", st, len(rec.evs))
	}
}

// TestAIBrixSessionsSaturatedClock: a peer's maximal sequence must not wrap the Lamport clock.
func TestAIBrixSessionsSaturatedClock(t *testing.T) {
	var rec recorder
	s := NewAIBrixSessions(AIBrixSessionConfig{}, 1, rec.publish)
	s.Apply(&AIBrixSessionEvent{Key: keyA, Target: podY, TTL: time.Minute, Sequence: math.MaxUint64, Writer: 0}, at(0))
	s.Bind(keyA, podX, time.Minute, at(0))
	if ev := rec.evs[len(rec.evs)-1]; ev.Sequence != math.MaxUint64 {
		t.Fatalf("sequence after a saturated peer: %d", ev.Sequence)
	}
}

// TestAIBrixSessionsBound: the table never exceeds MaxEntries; expired entries are swept before
// live ones are evicted, and the sweep runs at most once per second.
func TestAIBrixSessionsBound(t *testing.T) {
	key := func(i int) AIBrixSessionKey { return AIBrixSessionKey{Model: "m", Session: fmt.Sprint(i)} }
	tests := []struct {
		name        string
		fill        time.Duration // TTL of the first 4 bindings
		insertAt    time.Duration // when the next 4 are bound
		wantEvicted uint64
	}{
		{"live entries are evicted", time.Hour, time.Second, 4},
		{"expired entries are swept first", time.Second, 2 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewAIBrixSessions(AIBrixSessionConfig{MaxEntries: 4}, 1, nil)
			for i := range 4 {
				s.Bind(key(i), podX, tt.fill, at(0))
			}
			for i := 4; i < 8; i++ {
				s.Bind(key(i), podY, time.Hour, at(tt.insertAt))
				if n := s.Stats().Entries; n > 4 {
					t.Fatalf("%d entries above the bound", n)
				}
			}
			st := s.Stats()
			if st.Entries != 4 || st.Evicted != tt.wantEvicted {
				t.Fatalf("stats %+v, want 4 entries, %d evicted", st, tt.wantEvicted)
			}
			for i := 4; i < 8; i++ { // the newest bindings always survive
				if got, ok := s.Get(key(i), at(tt.insertAt)); !ok || got != podY {
					t.Fatalf("binding %d lost: %+v, %v", i, got, ok)
				}
			}
		})
	}
	// Peers' bindings obey the same bound.
	s := NewAIBrixSessions(AIBrixSessionConfig{MaxEntries: 2}, 1, nil)
	for i := range 10 {
		s.Apply(&AIBrixSessionEvent{Key: key(i), Target: podX, TTL: time.Hour, Sequence: 1, Writer: 2}, at(0))
	}
	if n := s.Stats().Entries; n != 2 {
		t.Fatalf("%d entries after peer binds, bound 2", n)
	}
}

// TestAIBrixSessionsConvergeProperty: replicas that bind the same few sessions to random targets
// and exchange every published event — reordered and duplicated at random — end with the same
// bindings, namely the target of the highest-version event of each session (the naive
// reference: one pass over all events, no table).
func TestAIBrixSessionsConvergeProperty(t *testing.T) {
	targets := []AIBrixTarget{podX, podY, {Candidate: "default/pod-z", Port: 9000}}
	keys := []AIBrixSessionKey{keyA, keyB, {Model: "other", Session: "user-1"}}
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 99))
		n := 2 + r.IntN(3)
		recs := make([]*recorder, n)
		reps := make([]*AIBrixSessions, n)
		for i := range reps {
			recs[i] = &recorder{}
			reps[i] = NewAIBrixSessions(AIBrixSessionConfig{}, uint64(i+1), recs[i].publish)
		}
		var pending []AIBrixSessionEvent // published, not yet delivered to everyone
		var all []AIBrixSessionEvent
		from := map[int]int{} // index in pending → origin replica
		now := time.Duration(0)
		for range 40 {
			now += time.Duration(r.IntN(3)) * time.Millisecond // clocks may stand still
			i := r.IntN(n)
			if r.IntN(3) > 0 || len(pending) == 0 {
				before := len(recs[i].evs)
				reps[i].Bind(keys[r.IntN(len(keys))], targets[r.IntN(len(targets))], time.Hour, at(now))
				for _, ev := range recs[i].evs[before:] {
					from[len(pending)] = i
					pending = append(pending, ev)
					all = append(all, ev)
				}
				continue
			}
			// Deliver one pending event (possibly again) to a random other replica.
			j := r.IntN(len(pending))
			if to := r.IntN(n); to != from[j] {
				reps[to].Apply(&pending[j], at(now))
			}
		}
		// Finally everyone hears everything, in a random order.
		for _, k := range r.Perm(len(all)) {
			for to := range reps {
				reps[to].Apply(&all[k], at(now))
			}
		}
		for _, key := range keys {
			var best *AIBrixSessionEvent
			for i := range all {
				ev := &all[i]
				if ev.Key == key && (best == nil || cmp.Or(cmp.Compare(ev.Sequence, best.Sequence), cmp.Compare(ev.Writer, best.Writer)) > 0) {
					best = ev
				}
			}
			for i, s := range reps {
				got, ok := s.Get(key, at(now))
				if best == nil {
					if ok {
						t.Fatalf("seed %d: replica %d has %+v for never-bound %+v", seed, i, got, key)
					}
					continue
				}
				if !ok || got != best.Target {
					t.Fatalf("seed %d: replica %d has %+v (%v) for %+v, highest version says %+v",
						seed, i, got, ok, key, best.Target)
				}
			}
		}
	}
}

// BenchmarkAIBrixSessionsGetBind is the per-decision cost of a sticky session: one Get and one
// refreshing Bind, across 10k sessions.
func BenchmarkAIBrixSessionsGetBind(b *testing.B) {
	s := NewAIBrixSessions(AIBrixSessionConfig{}, 1, func(*AIBrixSessionEvent) {})
	keys := make([]AIBrixSessionKey, 10_000)
	for i := range keys {
		keys[i] = AIBrixSessionKey{Model: "llama", Session: fmt.Sprintf("user-%d", i)}
		s.Bind(keys[i], podX, time.Hour, at(0))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		now := at(time.Duration(i) * time.Microsecond)
		if t, ok := s.Get(k, now); ok {
			s.Bind(k, t, time.Hour, now)
		}
		i++
	}
}

// BenchmarkAIBrixSessionsApply is the cost of merging one peer binding into 10k sessions.
func BenchmarkAIBrixSessionsApply(b *testing.B) {
	s := NewAIBrixSessions(AIBrixSessionConfig{}, 1, nil)
	evs := make([]AIBrixSessionEvent, 10_000)
	for i := range evs {
		evs[i] = AIBrixSessionEvent{Key: AIBrixSessionKey{Model: "llama", Session: fmt.Sprintf("user-%d", i)},
			Target: targetsFor(i), TTL: time.Hour, Writer: 2}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ev := &evs[i%len(evs)]
		ev.Sequence = uint64(i)
		s.Apply(ev, at(0))
		i++
	}
}

// targetsFor spreads benchmark bindings over two pods.
func targetsFor(i int) AIBrixTarget {
	if i%2 == 0 {
		return podX
	}
	return podY
}

// TestAIBrixWireRoundTrip: what PublishAIBrixSession puts on the bus comes back from
// aibrixEventFromBus as the same event (TTL at millisecond precision, rounded up), and
// ttlMillis saturates instead of wrapping.
func TestAIBrixWireRoundTrip(t *testing.T) {
	tests := []struct {
		ttl, want time.Duration
	}{
		{time.Minute, time.Minute},
		{0, 0},
		{-time.Second, 0},
		{time.Nanosecond, time.Millisecond},
		{1500 * time.Microsecond, 2 * time.Millisecond},
		{100 * 24 * time.Hour, time.Duration(math.MaxUint32) * time.Millisecond},
	}
	for _, tt := range tests {
		ev := AIBrixSessionEvent{Key: keyA, Target: podX, TTL: tt.ttl, Sequence: 9, Writer: 4}
		a := &bus.Affinity{Sender: "peer", Model: ev.Key.Model, Group: aibrixAffinityGroup, SessionID: ev.Key.Session,
			Sequence: ev.Sequence, Writer: ev.Writer, Target: ev.Target.Candidate, Port: ev.Target.Port, TTLMillis: ttlMillis(ev.TTL)}
		raw, err := bus.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		m, err := bus.DecodeEnvelope(raw)
		if err != nil {
			t.Fatal(err)
		}
		got := aibrixEventFromBus(m.(*bus.Affinity))
		want := ev
		want.TTL, want.Sender = tt.want, "peer"
		if got != want {
			t.Fatalf("ttl %v: got %+v, want %+v", tt.ttl, got, want)
		}
	}
}

// FuzzAIBrixSessionsFromWire feeds arbitrary bus bytes to a small table the way the replicator
// does (decode, keep target bindings, apply), interleaved with local binds and reads. Nothing
// may panic, the table never exceeds its bound, and a local bind is always readable at once.
func FuzzAIBrixSessionsFromWire(f *testing.F) {
	seed := &bus.Affinity{Sender: "peer", BootID: 1, Model: "llama", Group: aibrixAffinityGroup, SessionID: "user-1",
		Sequence: 5, Writer: 2, Target: "ns/x", Port: 8000, TTLMillis: 1000}
	if raw, err := bus.Marshal(seed); err == nil {
		f.Add(raw, uint8(3))
	}
	f.Add([]byte{0x95, 1, 2, 0xa1, 'p', 1, 0x9a}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, op uint8) {
		s := NewAIBrixSessions(AIBrixSessionConfig{MaxEntries: 3}, 1, func(*AIBrixSessionEvent) {})
		m, err := bus.DecodeEnvelope(data)
		a, ok := m.(*bus.Affinity)
		if err != nil || !ok || a.Target == "" {
			return
		}
		ev := aibrixEventFromBus(a)
		for i := range 5 {
			now := at(time.Duration(i) * time.Duration(op) * time.Millisecond)
			s.Apply(&ev, now)
			ev.Key.Session += "'"
			k := AIBrixSessionKey{Model: a.Model, Session: fmt.Sprint(i, op)}
			s.Bind(k, podX, time.Second, now)
			if got, ok := s.Get(k, now); !ok || got != podX {
				t.Fatalf("local bind unreadable: %+v, %v", got, ok)
			}
			if n := s.Stats().Entries; n > 3 {
				t.Fatalf("%d entries above the bound", n)
			}
		}
	})
}

// TestAIBrixSessionsConcurrent runs local binds, reads and peer applies of overlapping
// sessions from several goroutines (run with -race): the table stays within its bound and
// every session ends bound to one of the targets that were written.
func TestAIBrixSessionsConcurrent(t *testing.T) {
	s := NewAIBrixSessions(AIBrixSessionConfig{MaxEntries: 64}, 1, func(*AIBrixSessionEvent) {})
	targets := []AIBrixTarget{podX, podY}
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 2000 {
				k := AIBrixSessionKey{Model: "m", Session: fmt.Sprint(i % 100)}
				now := at(time.Duration(i) * time.Millisecond)
				switch (g + i) % 3 {
				case 0:
					s.Bind(k, targets[i%2], time.Second, now)
				case 1:
					s.Apply(&AIBrixSessionEvent{Key: k, Target: targets[(i+1)%2], TTL: time.Second,
						Sequence: uint64(i), Writer: uint64(g + 10)}, now)
				default:
					if got, ok := s.Get(k, now); ok && got != podX && got != podY {
						t.Errorf("session %v bound to unknown %+v", k, got)
					}
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	if n := s.Stats().Entries; n > 64 {
		t.Fatalf("%d entries above the bound", n)
	}
}
