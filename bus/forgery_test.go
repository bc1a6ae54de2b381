package bus

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// Forged-message storm: 60,000 random, mutated and truncated messages, published by a client
// that has only what NATS permissions leave an authorised non-peer: its own v2 subjects and the
// v1 subjects (which a permissioned server would refuse, and LegacyV1 off refuses too). They
// claim to come from the receiver's real peer (mutations of that peer's genuine messages),
// from the receiver itself, or from anyone. None may change membership, boot ids or bookings:
// every one must end up in a counter.

const stormMessages = 60_000

func TestForgedStormChangesOnlyCounters(t *testing.T) {
	n := NewMemNetwork()
	n.PendingLimit = 1 << 17
	const peer, recv, forger = "tcp://peer:9092", "tcp://recv:9092", "tcp://forger:9092"
	var sr sink
	r := newRep(t, n.Connect(), sr.hook(Config{ReplicaID: recv, Peers: []string{peer}, DiscoverPeers: true}))
	p := newRep(t, n.Connect(), Config{ReplicaID: peer, HeartbeatInterval: 50 * time.Millisecond})
	// The member list changes before the join callback runs: wait for both, so that a late
	// callback is not mistaken for one a forgery caused.
	waitFor(t, func() error {
		if m := r.Members(); len(m) != 1 || m[0].ID != peer {
			return fmt.Errorf("members %+v", m)
		}
		if c := sr.changes(); len(c) != 1 {
			return fmt.Errorf("member callbacks %+v", c)
		}
		return nil
	})
	before := r.Members()[0]
	baseline := len(sr.all()) // the peer's join

	// Genuine messages of the peer (and of the receiver) to mutate.
	var seeds [][]byte
	for _, m := range []Message{
		&Heartbeat{Sender: peer, BootID: p.BootID(), HTTPAddr: "http://peer:8092", StartedAt: 1},
		&Heartbeat{Sender: peer, BootID: p.BootID(), Leaving: true},
		&Heartbeat{Sender: peer, BootID: p.BootID() + 1},
		&Heartbeat{Sender: recv, BootID: 5},
		&Lifecycle{Sender: peer, BootID: p.BootID(), Model: "m", RequestID: "r1", Kind: LifecycleFree},
		&Lifecycle{Sender: peer, BootID: p.BootID(), Model: "m", RequestID: "r2", Kind: LifecycleAdd,
			Add: &AddData{TokenSequence: []uint64{1, 2, 3}, ISL: 3}},
		&LiveSet{Sender: peer, BootID: p.BootID(), Model: "m", SetID: 1, Chunks: 1},
		&LiveSet{Sender: peer, BootID: p.BootID(), Model: "m", SetID: 2, Chunk: 0, Chunks: 3, IDs: []string{"a", "b"}},
		&ResyncRequest{Sender: peer, BootID: p.BootID(), Target: recv},
		&Affinity{Sender: peer, BootID: p.BootID(), Model: "m", SessionID: "s", Owner: kvwire.Owner{Worker: 1}},
	} {
		b, err := Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	subj := r.Subjects()
	subjects := []string{
		subj.LifecycleFrom(forger), subj.AffinityFrom(forger), subj.MembersFrom(forger),
		subj.Lifecycle(), subj.Affinity(), subj.Members(),
	}
	rng := rand.New(rand.NewPCG(15, 1))
	tr := n.Connect()
	defer tr.Close()
	for i := range stormMessages {
		var msg []byte
		switch seed := seeds[rng.IntN(len(seeds))]; i % 4 {
		case 0: // random bytes
			msg = make([]byte, rng.IntN(64))
			for j := range msg {
				msg[j] = byte(rng.UintN(256))
			}
		case 1: // bit flips
			msg = append([]byte(nil), seed...)
			for range 1 + rng.IntN(4) {
				msg[rng.IntN(len(msg))] ^= 1 << rng.UintN(8)
			}
		case 2: // truncation
			msg = seed[:rng.IntN(len(seed))]
		default: // intact, replayed by the forger
			msg = seed
		}
		if err := tr.Publish(subjects[rng.IntN(len(subjects))], msg); err != nil {
			t.Fatal(err)
		}
	}
	accounted := func() uint64 {
		st := r.Stats()
		var total uint64
		for _, s := range []StreamStats{st.Lifecycle, st.Affinity, st.Heartbeats} {
			total += s.Impersonations + s.DecodeErrors + s.V1Refused
		}
		return total
	}
	waitFor(t, func() error {
		if got := accounted(); got != stormMessages {
			return fmt.Errorf("%d of %d forged messages counted", got, stormMessages)
		}
		return nil
	})
	st := r.Stats()
	t.Logf("impersonations %d/%d/%d, decode errors %d/%d/%d, v1 refused %d/%d/%d (lifecycle/affinity/members)",
		st.Lifecycle.Impersonations, st.Affinity.Impersonations, st.Heartbeats.Impersonations,
		st.Lifecycle.DecodeErrors, st.Affinity.DecodeErrors, st.Heartbeats.DecodeErrors,
		st.Lifecycle.V1Refused, st.Affinity.V1Refused, st.Heartbeats.V1Refused)
	if st.Restarts != 0 || st.Lifecycle.Received != 0 || st.Affinity.Received != 0 {
		t.Fatalf("forgeries were applied: %+v", st)
	}
	// Membership: the same peer, same boot, still live; nobody else.
	p.PublishLifecycle(freeEvent("after")) // a genuine event still flows, and fences the check
	waitFor(t, func() error {
		if l := sr.lifecycles(); len(l) != 1 || l[0].RequestID != "after" {
			return fmt.Errorf("receiver applied %+v", l)
		}
		return nil
	})
	after := r.Members()
	if len(after) != 1 || after[0].ID != peer || after[0].BootID != before.BootID || after[0].FirstSeen != before.FirstSeen {
		t.Fatalf("membership changed: before %+v, after %+v", before, after)
	}
	if got := sr.all()[baseline:]; len(got) != 1 {
		t.Fatalf("callbacks besides the genuine event: %+v", got)
	}
}

// TestLegacyV1CannotOverrideV2: with LegacyV1 on (mixed-version rollout), a v1 message for a
// replica already heard on its own v2 subject is dropped and counted, so a forged v1
// heartbeat cannot announce a restart of an upgraded peer; a replica that speaks only v1 is
// still heard.
func TestLegacyV1CannotOverrideV2(t *testing.T) {
	n := NewMemNetwork()
	var sr sink
	r := newRep(t, n.Connect(), sr.hook(Config{ReplicaID: "r", Peers: []string{"p", "old"}, LegacyV1: true}))
	p := newRep(t, n.Connect(), Config{ReplicaID: "p"}) // an upgraded replica: v2 only
	waitFor(t, func() error {
		if len(r.Members()) != 1 {
			return fmt.Errorf("members %+v", r.Members())
		}
		return nil
	})
	tr := n.Connect()
	defer tr.Close()
	forged, _ := Marshal(&Heartbeat{Sender: "p", BootID: p.BootID() + 1})
	if err := tr.Publish(r.Subjects().Members(), forged); err != nil {
		t.Fatal(err)
	}
	legacy, _ := Marshal(&Lifecycle{Sender: "old", BootID: 3, Model: "m", RequestID: "v1-event", Kind: LifecycleFree})
	if err := tr.Publish(r.Subjects().Lifecycle(), legacy); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() error {
		if st := r.Stats(); st.Heartbeats.Unauthenticated != 1 {
			return fmt.Errorf("unauthenticated = %d", st.Heartbeats.Unauthenticated)
		}
		for _, l := range sr.lifecycles() {
			if l.RequestID == "v1-event" {
				return nil
			}
		}
		return fmt.Errorf("legacy v1 event not applied: %+v", sr.lifecycles())
	})
	if st := r.Stats(); st.Restarts != 0 {
		t.Fatalf("forged v1 heartbeat restarted the peer: %+v", st)
	}
	if m := r.Members(); len(m) != 1 || m[0].BootID != p.BootID() {
		t.Fatalf("members %+v", m)
	}
}

// TestNoExpiryWhileCutOff: a replica whose own connection is down hears nobody, which says
// nothing about its peers: none expires while it is cut off, nor right after it reconnects;
// a peer that really went silent expires a dead-peer interval after the reconnect.
func TestNoExpiryWhileCutOff(t *testing.T) {
	n := NewMemNetwork()
	var sa sink
	const hb, dead = 20 * time.Millisecond, 100 * time.Millisecond
	ta := n.Connect()
	a := newRep(t, ta, sa.hook(Config{ReplicaID: "a", HeartbeatInterval: hb, DeadAfter: dead}))
	b := newRep(t, n.Connect(), Config{ReplicaID: "b", HeartbeatInterval: hb})
	waitFor(t, func() error {
		if len(a.Members()) != 1 {
			return fmt.Errorf("members %+v", a.Members())
		}
		return nil
	})
	expired := func() int {
		k := 0
		for _, c := range sa.changes() {
			if c.Kind == MemberExpired {
				k++
			}
		}
		return k
	}
	ta.SetDown(true)
	// Each failed heartbeat is one tick: 15 ticks are well past the dead-peer interval.
	base := a.Stats().Heartbeats.PublishErrors
	waitFor(t, func() error {
		if got := a.Stats().Heartbeats.PublishErrors - base; got < 15 {
			return fmt.Errorf("%d ticks while down", got)
		}
		return nil
	})
	ta.SetDown(false)
	base = a.Stats().Heartbeats.Published
	waitFor(t, func() error {
		if got := a.Stats().Heartbeats.Published - base; got < 3 {
			return fmt.Errorf("%d ticks since the reconnect", got)
		}
		return nil
	})
	if k := expired(); k != 0 || len(a.Members()) != 1 {
		t.Fatalf("b expired while a was cut off: %d expiries, members %+v", k, a.Members())
	}
	// b really goes silent (its transport dies): it expires.
	b.Transport().(*MemTransport).SetDown(true)
	waitFor(t, func() error {
		if expired() != 1 {
			return fmt.Errorf("b not expired: %+v", sa.changes())
		}
		return nil
	})
}
