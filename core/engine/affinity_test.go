package engine

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// sessionEngine has two workers and session affinity with a 60 s TTL.
func sessionEngine(t *testing.T) *Engine {
	t.Helper()
	c := DefaultConfig()
	c.SessionAffinityTTL = 60 * time.Second
	e := newEngine(t, &c)
	mustUpsert(t, e, spec(1))
	mustUpsert(t, e, spec(2))
	return e
}

func sessReq(id, session string, tokens []uint32) *SelectRequest {
	r := selReq(id, tokens)
	r.SessionID = ptr(session)
	return r
}

func TestSessionAffinityBindsAndSticks(t *testing.T) {
	e := sessionEngine(t)
	first, err := e.SelectAndReserve(sessReq("a", "s1", toks(0, 8)), t0)
	if err != nil {
		t.Fatal(err)
	}
	bound := first.WorkerID
	other := 3 - bound
	// Load the bound worker heavily so that, without the binding, the cost would pick the other.
	for i := range 4 {
		if _, err := e.Reserve(&ReservationRequest{SelectionID: ptr("load" + string(rune('a'+i))), WorkerID: ptr(bound), Prompt: tokenPrompt(toks(1000*(i+1), 64))}, t0); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := e.Select(selReq("", toks(500, 8)), t0)
	if err != nil || plain.WorkerID != other {
		t.Fatalf("without a session the loaded worker should lose: got %v, %v", plain, err)
	}
	// A query-only select reads the binding.
	q, err := e.Select(sessReq("", "s1", toks(500, 8)), t0)
	if err != nil || q.WorkerID != bound {
		t.Fatalf("select with bound session: worker %v (err %v), want %d", q, err, bound)
	}
	// A second booking of the session sticks too and takes a second lease.
	second, err := e.SelectAndReserve(sessReq("b", "s1", toks(500, 8)), t0)
	if err != nil || second.WorkerID != bound {
		t.Fatalf("second booking: %v, %v; want worker %d", second, err, bound)
	}
	// An explicit affinity_target disables session routing.
	r := sessReq("c", "s1", toks(500, 8))
	r.AffinityTarget = &AffinityTarget{WorkerID: ptr(other)}
	if got, err := e.SelectAndReserve(r, t0); err != nil || got.WorkerID != other {
		t.Fatalf("affinity_target must win over the session: %v, %v", got, err)
	}
	var rd Ready
	e.TakeReady(&rd)
	effects := rd.Affinity
	if len(effects) != 2 || effects[0].SessionID != "s1" || effects[0].Owner.Worker != bound {
		t.Fatalf("affinity effects = %+v, want two bindings of s1 to worker %d", effects, bound)
	}
}

func TestSessionAffinityIdleExpiry(t *testing.T) {
	e := sessionEngine(t)
	resp, err := e.SelectAndReserve(sessReq("a", "s1", toks(0, 8)), t0)
	if err != nil {
		t.Fatal(err)
	}
	p := e.parts[PartitionKey{Model: DefaultName, Group: DefaultName}]
	if err := e.Free("a"); err != nil {
		t.Fatal(err)
	}
	e.Sweep(t0.Add(time.Second)) // stamps the idle deadline: t0+1s+60s
	if _, ok := p.sessions["s1"]; !ok {
		t.Fatal("binding reclaimed before its idle TTL")
	}
	e.Sweep(t0.Add(60 * time.Second))
	if b, ok := p.sessions["s1"]; !ok || b.owner.Worker != resp.WorkerID {
		t.Fatal("binding must survive until its idle deadline")
	}
	e.Sweep(t0.Add(62 * time.Second))
	if _, ok := p.sessions["s1"]; ok {
		t.Fatal("idle binding not reclaimed after its deadline")
	}
}

func TestSessionIDTooLong(t *testing.T) {
	e := sessionEngine(t)
	_, err := e.SelectAndReserve(sessReq("a", strings.Repeat("x", MaxSessionIDBytes+1), toks(0, 8)), t0)
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "must not exceed 256 bytes") {
		t.Fatalf("err = %v, want 400 about 256 bytes", err)
	}
	if len(e.resv) != 0 {
		t.Fatal("a rejected request must not book")
	}
}

func TestApplyAffinityVersions(t *testing.T) {
	e := sessionEngine(t)
	key := PartitionKey{Model: DefaultName, Group: DefaultName}
	p := e.parts[key]
	ev := AffinityEvent{Partition: key, SessionID: "s", Owner: Owner{Worker: 1}, Sequence: 10, Writer: 5}
	if !e.ApplyAffinity(&ev, t0) || p.sessions["s"].owner.Worker != 1 {
		t.Fatal("vacant binding not inserted")
	}
	older := ev
	older.Owner, older.Sequence = Owner{Worker: 2}, 9
	if e.ApplyAffinity(&older, t0) || p.sessions["s"].owner.Worker != 1 {
		t.Fatal("an older version must not replace the binding")
	}
	newer := older
	newer.Sequence = 11
	if !e.ApplyAffinity(&newer, t0) || p.sessions["s"].owner.Worker != 2 {
		t.Fatal("a newer version must replace the binding")
	}
	unknown := newer
	unknown.Owner, unknown.Sequence = Owner{Worker: 9}, 99
	if e.ApplyAffinity(&unknown, t0) {
		t.Fatal("a binding to an unknown worker must be dropped")
	}
}

// TestSessionLeaseReleasedByEveryEnd: a binding's lease is released however its booking ends —
// a peer's free, a peer admission replacing the row, the worker's removal — so idle bindings
// expire (found in review: only local frees and expiry released leases).
func TestSessionLeaseReleasedByEveryEnd(t *testing.T) {
	key := PartitionKey{Model: DefaultName, Group: DefaultName}
	ends := map[string]func(e *Engine, resp *SelectResponse){
		"peer free": func(e *Engine, resp *SelectResponse) {
			e.ApplyReplica(&ReplicaEvent{Partition: key, BlockSize: 4, RequestID: "a", Owner: Owner{Worker: resp.WorkerID}, Kind: LifecycleFree}, t0)
		},
		"peer admission replaces the row": func(e *Engine, resp *SelectResponse) {
			e.ApplyReplica(&ReplicaEvent{Partition: key, BlockSize: 4, RequestID: "a", Owner: Owner{Worker: resp.WorkerID},
				Kind: LifecycleAdd, Add: &ReplicaAdd{TokenSequence: []uint64{1}}, Sender: "peer"}, t0)
			e.DropPeer("peer")
		},
		"worker removed": func(e *Engine, resp *SelectResponse) {
			if _, err := e.DeleteWorker(resp.WorkerID); err != nil {
				t.Fatal(err)
			}
			mustUpsert(t, e, spec(resp.WorkerID)) // the partition keeps its other worker either way
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			e := sessionEngine(t)
			resp, err := e.SelectAndReserve(sessReq("a", "s1", toks(0, 8)), t0)
			if err != nil {
				t.Fatal(err)
			}
			end(e, resp)
			p := e.parts[key]
			if b := p.sessions["s1"]; b != nil && b.leases != 0 {
				t.Fatalf("binding still holds %d leases", b.leases)
			}
			e.Sweep(t0.Add(time.Second))
			e.Sweep(t0.Add(2 * time.Minute))
			if _, ok := p.sessions["s1"]; ok {
				t.Fatal("idle binding never expired")
			}
		})
	}
}
