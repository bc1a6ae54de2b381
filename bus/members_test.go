package bus

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func beat(id string, boot uint64) *Heartbeat {
	return &Heartbeat{Sender: id, BootID: boot, HTTPAddr: id + ":8092", StartedAt: int64(boot)}
}

func leave(id string, boot uint64) *Heartbeat {
	hb := beat(id, boot)
	hb.Leaving = true
	return hb
}

// TestMembersScenarios drives the table through scripted steps with
// explicit times. Each step is a heartbeat (hb != nil) or an Expire call.
func TestMembersScenarios(t *testing.T) {
	type step struct {
		at      time.Duration
		hb      *Heartbeat // nil: call Expire(at)
		verdict BootVerdict
		prev    uint64
		change  ChangeKind // for heartbeats
		expired []string   // for Expire
		live    []string   // live ids after the step
	}
	s := time.Second
	tests := []struct {
		name  string
		steps []step
	}{
		{"join then beats keep alive", []step{
			{at: 0, hb: beat("a", 1), verdict: BootNew, change: MemberJoined, live: []string{"a"}},
			{at: 1 * s, hb: beat("a", 1), verdict: BootCurrent, change: ChangeNone, live: []string{"a"}},
			{at: 6 * s, expired: nil, live: []string{"a"}}, // 5 s silent: exactly the limit, still live
			{at: 6*s + 1, expired: []string{"a"}, live: nil},
		}},
		{"restart while live", []step{
			{at: 0, hb: beat("a", 1), verdict: BootNew, change: MemberJoined, live: []string{"a"}},
			{at: s, hb: beat("a", 2), verdict: BootRestarted, prev: 1, change: MemberRestarted, live: []string{"a"}},
			{at: 2 * s, hb: beat("a", 1), verdict: BootRetired, change: ChangeNone, live: []string{"a"}},
			{at: 3 * s, hb: beat("a", 2), verdict: BootCurrent, change: ChangeNone, live: []string{"a"}},
		}},
		{"graceful leave is immediate and final for that boot", []step{
			{at: 0, hb: beat("a", 1), verdict: BootNew, change: MemberJoined, live: []string{"a"}},
			{at: 0, hb: beat("b", 7), verdict: BootNew, change: MemberJoined, live: []string{"a", "b"}},
			{at: s, hb: leave("a", 1), verdict: BootCurrent, change: MemberLeft, live: []string{"b"}},
			{at: 2 * s, hb: beat("a", 1), verdict: BootRetired, change: ChangeNone, live: []string{"b"}},
			{at: 3 * s, hb: beat("a", 3), verdict: BootRestarted, prev: 1, change: MemberJoined, live: []string{"a", "b"}},
		}},
		{"leave from a stale boot is ignored", []step{
			{at: 0, hb: beat("a", 1), verdict: BootNew, change: MemberJoined, live: []string{"a"}},
			{at: s, hb: beat("a", 2), verdict: BootRestarted, prev: 1, change: MemberRestarted, live: []string{"a"}},
			{at: s, hb: leave("a", 1), verdict: BootRetired, change: ChangeNone, live: []string{"a"}},
		}},
		{"expired member returns with same boot", []step{
			{at: 0, hb: beat("a", 1), verdict: BootNew, change: MemberJoined, live: []string{"a"}},
			{at: 10 * s, expired: []string{"a"}, live: nil},
			{at: 11 * s, hb: beat("a", 1), verdict: BootCurrent, change: MemberJoined, live: []string{"a"}},
		}},
		{"expired member returns restarted", []step{
			{at: 0, hb: beat("a", 1), verdict: BootNew, change: MemberJoined, live: []string{"a"}},
			{at: 10 * s, expired: []string{"a"}, live: nil},
			{at: 11 * s, hb: beat("a", 9), verdict: BootRestarted, prev: 1, change: MemberJoined, live: []string{"a"}},
		}},
		{"expiry is per member and sorted", []step{
			{at: 0, hb: beat("c", 1), verdict: BootNew, change: MemberJoined, live: []string{"c"}},
			{at: 0, hb: beat("a", 1), verdict: BootNew, change: MemberJoined, live: []string{"a", "c"}},
			{at: 3 * s, hb: beat("b", 1), verdict: BootNew, change: MemberJoined, live: []string{"a", "b", "c"}},
			{at: 7 * s, expired: []string{"a", "c"}, live: []string{"b"}},
			{at: 8 * s, expired: nil, live: []string{"b"}}, // 5 s silent: at the limit
		}},
		{"leave before any beat", []step{
			{at: 0, hb: leave("z", 4), verdict: BootNew, change: ChangeNone, live: nil},
			{at: s, hb: beat("z", 4), verdict: BootRetired, change: ChangeNone, live: nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMembers(time.Second, 5)
			for i, st := range tt.steps {
				now := at(st.at)
				if st.hb != nil {
					obs := m.Observe(st.hb, now)
					if obs.Verdict != st.verdict || obs.PrevBootID != st.prev || obs.Change.Kind != st.change {
						t.Fatalf("step %d: got verdict=%v prev=%d change=%v, want %v %d %v",
							i, obs.Verdict, obs.PrevBootID, obs.Change.Kind, st.verdict, st.prev, st.change)
					}
					if st.change != ChangeNone && obs.Change.Member.ID != st.hb.Sender {
						t.Fatalf("step %d: change for %q", i, obs.Change.Member.ID)
					}
				} else {
					var got []string
					for _, c := range m.Expire(now) {
						if c.Kind != MemberExpired {
							t.Fatalf("step %d: Expire returned %v", i, c.Kind)
						}
						got = append(got, c.Member.ID)
					}
					if !slices.Equal(got, st.expired) {
						t.Fatalf("step %d: expired %v, want %v", i, got, st.expired)
					}
				}
				var live []string
				for _, mem := range m.Live() {
					live = append(live, mem.ID)
				}
				if !slices.Equal(live, st.live) {
					t.Fatalf("step %d: live %v, want %v", i, live, st.live)
				}
				if m.Len() != len(st.live) {
					t.Fatalf("step %d: Len %d", i, m.Len())
				}
			}
		})
	}
}

func TestMembersRecordsDetails(t *testing.T) {
	m := NewMembers(time.Second, 3)
	m.Observe(&Heartbeat{Sender: "a", BootID: 5, HTTPAddr: "h1", StartedAt: 11}, at(0))
	m.Observe(&Heartbeat{Sender: "a", BootID: 5, HTTPAddr: "h2", StartedAt: 11}, at(time.Second))
	got, ok := m.Get("a")
	want := Member{ID: "a", BootID: 5, HTTPAddr: "h2", StartedAt: 11, FirstSeen: at(0), LastSeen: at(time.Second)}
	if !ok || got != want {
		t.Fatalf("Get = %+v %v, want %+v", got, ok, want)
	}
	if _, ok := m.Get("b"); ok || m.IsLive("b") || !m.IsLive("a") {
		t.Fatal("liveness of unknown member")
	}
	if m.ExpiryAfter() != 3*time.Second {
		t.Fatalf("ExpiryAfter = %v", m.ExpiryAfter())
	}
	if d := NewMembers(0, 0).ExpiryAfter(); d != DefaultMissedBeats*time.Second {
		t.Fatalf("default expiry %v", d)
	}
}

// TestCheckBootRetiresRing: each restart retires the previous boot, and the
// last retiredBoots of them stay rejected.
func TestCheckBootRetiresRing(t *testing.T) {
	m := NewMembers(time.Second, 5)
	if v, _ := m.CheckBoot("a", 100); v != BootNew {
		t.Fatalf("first: %v", v)
	}
	for b := uint64(101); b <= 110; b++ {
		if v, prev := m.CheckBoot("a", b); v != BootRestarted || prev != b-1 {
			t.Fatalf("boot %d: %v prev %d", b, v, prev)
		}
		if v, _ := m.CheckBoot("a", b); v != BootCurrent {
			t.Fatalf("repeat %d: %v", b, v)
		}
		for old := max(b-retiredBoots, 100); old < b; old++ {
			if v, _ := m.CheckBoot("a", old); v != BootRetired {
				t.Fatalf("retired boot %d after %d: %v", old, b, v)
			}
		}
	}
}

func TestBootRegistryBounded(t *testing.T) {
	m := NewMembers(time.Second, 5)
	m.Observe(beat("live", 1), at(0))
	for i := range 3 * maxBootRecords {
		m.CheckBoot(fmt.Sprintf("id-%d", i), 1)
		if len(m.boots) > maxBootRecords+m.Len() {
			t.Fatalf("registry grew to %d", len(m.boots))
		}
	}
	if v, _ := m.CheckBoot("live", 1); v != BootCurrent {
		t.Fatalf("live member's boot record was trimmed: %v", v)
	}
}

// naiveMembers is the reference model: full history, no ring, linear scans.
type naiveMembers struct {
	expiry  time.Duration
	seen    map[string][]uint64 // every boot accepted per id, in order
	current map[string]uint64   // current boot (absent after leave)
	last    map[string]time.Time
	live    map[string]bool
}

func (n *naiveMembers) verdict(id string, boot uint64) BootVerdict {
	hist := n.seen[id]
	switch {
	case len(hist) == 0:
		return BootNew
	case n.hasCurrent(id) && n.current[id] == boot:
		return BootCurrent
	case slices.Contains(hist, boot):
		return BootRetired
	}
	return BootRestarted
}

func (n *naiveMembers) hasCurrent(id string) bool { _, ok := n.current[id]; return ok }

func (n *naiveMembers) observe(hb *Heartbeat, now time.Time) BootVerdict {
	v := n.verdict(hb.Sender, hb.BootID)
	if v == BootRetired {
		return v
	}
	if v != BootCurrent {
		n.seen[hb.Sender] = append(n.seen[hb.Sender], hb.BootID)
	}
	if hb.Leaving {
		delete(n.current, hb.Sender)
		delete(n.live, hb.Sender)
		return v
	}
	n.current[hb.Sender] = hb.BootID
	n.last[hb.Sender] = now
	n.live[hb.Sender] = true
	return v
}

func (n *naiveMembers) expire(now time.Time) {
	for id := range n.live {
		if now.Sub(n.last[id]) > n.expiry {
			delete(n.live, id)
		}
	}
}

// TestMembersMatchesNaiveModel is a property test: random heartbeats,
// leaves and expiries (at most retiredBoots distinct boots per id, so the
// ring never forgets) agree with the naive model on every verdict and on
// the live set.
func TestMembersMatchesNaiveModel(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		m := NewMembers(time.Second, 3)
		n := &naiveMembers{expiry: 3 * time.Second, seen: map[string][]uint64{},
			current: map[string]uint64{}, last: map[string]time.Time{}, live: map[string]bool{}}
		now := t0
		for step := range 300 {
			now = now.Add(time.Duration(r.IntN(1500)) * time.Millisecond)
			if r.IntN(6) == 0 {
				m.Expire(now)
				n.expire(now)
			} else {
				id := string(rune('a' + r.IntN(4)))
				hb := beat(id, uint64(1+r.IntN(retiredBoots)))
				hb.Leaving = r.IntN(8) == 0
				got := m.Observe(hb, now).Verdict
				if want := n.observe(hb, now); got != want {
					t.Fatalf("seed %d step %d %+v: verdict %v, want %v", seed, step, hb, got, want)
				}
			}
			var live []string
			for id := range n.live {
				live = append(live, id)
			}
			slices.Sort(live)
			var got []string
			for _, mem := range m.Live() {
				got = append(got, mem.ID)
				if mem.BootID != n.current[mem.ID] {
					t.Fatalf("seed %d step %d: %s boot %d, want %d", seed, step, mem.ID, mem.BootID, n.current[mem.ID])
				}
			}
			if !slices.Equal(got, live) {
				t.Fatalf("seed %d step %d: live %v, want %v", seed, step, got, live)
			}
		}
	}
}

// TestMembersBounded: beyond MaxLive, heartbeats of new ids change nothing but the rejection
// counter; live members keep beating and a departure makes room.
func TestMembersBounded(t *testing.T) {
	m := NewMembers(time.Second, 3)
	m.SetMaxLive(2)
	m.Observe(beat("a", 1), at(0))
	m.Observe(beat("b", 1), at(0))
	for i := range 100 {
		if obs := m.Observe(beat(fmt.Sprint("x", i), 1), at(0)); !obs.Rejected || obs.Change.Kind != ChangeNone {
			t.Fatalf("heartbeat of a new id into a full table: %+v", obs)
		}
	}
	if m.Len() != 2 || m.Rejected() != 100 {
		t.Fatalf("len %d rejected %d", m.Len(), m.Rejected())
	}
	if obs := m.Observe(beat("a", 1), at(time.Second)); obs.Rejected {
		t.Fatal("a live member's heartbeat was rejected")
	}
	m.Observe(&Heartbeat{Sender: "b", BootID: 1, Leaving: true}, at(time.Second))
	if obs := m.Observe(beat("c", 1), at(time.Second)); obs.Rejected || obs.Change.Kind != MemberJoined {
		t.Fatalf("a new id after a departure: %+v", obs)
	}
}

// TestUnauthenticatedCannotRestart: once an id is heard authenticated, unauthenticated
// heartbeats for it (new boot ids, leaves) change nothing.
func TestUnauthenticatedCannotRestart(t *testing.T) {
	m := NewMembers(time.Second, 3)
	m.ObserveFrom(beat("p", 7), at(0), true)
	for _, hb := range []*Heartbeat{beat("p", 8), {Sender: "p", BootID: 7, Leaving: true}} {
		if obs := m.ObserveFrom(hb, at(time.Second), false); obs.Verdict != BootUnauthenticated || obs.Change.Kind != ChangeNone {
			t.Fatalf("unauthenticated %+v: %+v", hb, obs)
		}
	}
	if mem, ok := m.Get("p"); !ok || mem.BootID != 7 {
		t.Fatalf("p is %+v %v", mem, ok)
	}
	// A legacy-only id is still tracked from unauthenticated heartbeats.
	if obs := m.ObserveFrom(beat("old", 1), at(0), false); obs.Change.Kind != MemberJoined {
		t.Fatalf("legacy heartbeat: %+v", obs)
	}
}
