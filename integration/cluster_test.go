package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/kvselect/kvselect/core"
)

// The replica clustering scenario of issue 4, run twice: on one external nats-server process,
// and on the replicas' embedded NATS servers routed into one cluster.
//
// Invariants shown (spec "Consistency Invariants"): admission, prefill-complete and free are
// synchronised to every peer, so B's and C's /loads reach A's numbers; output-block growth
// stays local; while NATS is gone every replica keeps answering from local state; when NATS
// is back, sync resumes without restarting replicas, and the resync rule
// (core/replication_resync.go) brings over the admissions published during the outage.

// clusterOf returns "--replica-sync-peers" naming every id but self.
func peersFlag(self string, ids ...string) string {
	var out []string
	for _, id := range ids {
		if id != self {
			out = append(out, id)
		}
	}
	return strings.Join(out, ",")
}

// startTrio starts replicas a, b, c with the given per-replica extra flags, each peering with
// the other two, registers the catalog on each and waits until each sees the other two.
func startTrio(t *testing.T, extra func(id string) []string) (a, b, c *replica) {
	t.Helper()
	ids := []string{"a", "b", "c"}
	rs := make([]*replica, 3)
	for i, id := range ids {
		args := append([]string{"--replica-sync-peers", peersFlag(id, ids...)}, extra(id)...)
		rs[i] = startReplica(t, id, args...)
	}
	for i, r := range rs {
		registerCatalog(t, r)
		waitMembers(t, r, peersList(ids, ids[i])...)
	}
	return rs[0], rs[1], rs[2]
}

// peersList is ids without self.
func peersList(ids []string, self string) []string {
	var out []string
	for _, id := range ids {
		if id != self {
			out = append(out, id)
		}
	}
	return out
}

// lifecycleScenario books on A and shows that admission, prefill_complete and DELETE reach B
// and C while output_block does not. It leaves no booking behind.
func lifecycleScenario(t *testing.T, a, b, c *replica) {
	t.Helper()
	// Admission: two bookings on A (one will take an output block), one fence.
	x := book(t, a, "x", 1)
	book(t, a, "y", 2)
	synced := waitSameLoads(t, 2, a, b, c)
	if x.EffectivePrefillTokens == 0 || rankOf(synced, x.WorkerID, x.DPRank).PotentialPrefillTokens == 0 {
		t.Fatalf("booking x tracks no prefill (%+v); the prefill_complete step would prove nothing", x)
	}

	// prefill_complete on A clears x's prefill on every replica.
	a.must(t, http.StatusOK, "POST", "/reservations/x/prefill_complete", map[string]any{}, nil)
	waitFor(t, syncTimeout, func() error {
		for _, r := range []*replica{a, b, c} {
			l, err := loads(r)
			if err != nil {
				return err
			}
			if got := rankOf(l, x.WorkerID, x.DPRank); got.PotentialPrefillTokens >= rankOf(synced, x.WorkerID, x.DPRank).PotentialPrefillTokens {
				return fmt.Errorf("%s still has x's prefill: %+v", r.id, got)
			}
		}
		return nil
	})
	afterPrefill := waitSameLoads(t, 2, a, b, c)

	// output_block on A changes A's decode blocks only.
	for range 3 {
		a.must(t, http.StatusOK, "POST", "/reservations/x/output_block", map[string]any{}, nil)
	}
	la, err := loads(a)
	if err != nil {
		t.Fatal(err)
	}
	if rankOf(la, x.WorkerID, x.DPRank).PotentialDecodeBlocks <= rankOf(afterPrefill, x.WorkerID, x.DPRank).PotentialDecodeBlocks {
		t.Fatalf("output_block did not grow A's decode blocks: %+v", rankOf(la, x.WorkerID, x.DPRank))
	}
	// Fence: a free published after the output blocks. Once B and C applied it they would have
	// applied any output-block event too.
	a.must(t, http.StatusOK, "DELETE", "/reservations/y", nil, nil)
	for _, r := range []*replica{b, c} {
		waitFor(t, syncTimeout, func() error {
			l, err := loads(r)
			if err != nil {
				return err
			}
			if n := totalActive(l); n != 1 {
				return fmt.Errorf("%s has %d active requests after y's free, want 1", r.id, n)
			}
			return nil
		})
		l, _ := loads(r)
		la, _ := loads(a)
		got, mine := rankOf(l, x.WorkerID, x.DPRank), rankOf(la, x.WorkerID, x.DPRank)
		if got.PotentialDecodeBlocks >= mine.PotentialDecodeBlocks || got.ActiveRequests != mine.ActiveRequests {
			t.Fatalf("%s rank of x %+v vs A %+v: output blocks must stay local", r.id, got, mine)
		}
	}

	// DELETE of A's booking sent to C (any replica may free it) propagates to A and B.
	c.must(t, http.StatusOK, "DELETE", "/reservations/x", nil, nil)
	waitSameLoads(t, 0, a, b, c)
}

// rankOf returns the load row of (worker, rank) in the default partition.
func rankOf(ls []core.PartitionLoads, worker uint64, rank uint32) core.PotentialLoad {
	for _, p := range ls {
		for _, l := range p.Loads {
			if l.WorkerID == worker && l.DPRank == rank {
				return l
			}
		}
	}
	return core.PotentialLoad{}
}

// selectEverywhere books one request on each replica (200s from local state) and returns how
// many requests it booked.
func selectEverywhere(t *testing.T, tag string, n int, rs ...*replica) int {
	t.Helper()
	for i, r := range rs {
		book(t, r, tag+"-"+r.id, n+i)
		r.must(t, http.StatusOK, "POST", "/select", map[string]any{"token_ids": prompt(n + i)}, nil)
	}
	return len(rs)
}

func TestClusterExternalNATS(t *testing.T) {
	needBinaries(t)
	ns := startNATS(t, 0)
	a, b, c := startTrio(t, func(string) []string { return []string{"--nats-url", ns.url()} })
	lifecycleScenario(t, a, b, c)

	// Outage: the NATS server dies; every replica keeps selecting and booking from local state.
	book(t, a, "pre-outage", 10)
	waitSameLoads(t, 1, a, b, c)
	ns.p.kill(t)
	booked := 1 + selectEverywhere(t, "outage", 20, a, b, c)
	book(t, a, "outage-a2", 30)
	booked++
	a.must(t, http.StatusOK, "POST", "/reservations/outage-a2/prefill_complete", map[string]any{}, nil)
	for _, r := range []*replica{a, b, c} {
		l, err := loads(r)
		if err != nil {
			t.Fatal(err)
		}
		mine := 1 // its own outage booking
		if r == a {
			mine = 2
		}
		if n := totalActive(l); n != uint64(1+mine) {
			t.Fatalf("%s has %d active requests during the outage, want %d (pre-outage + its own)", r.id, n, 1+mine)
		}
	}

	// NATS comes back on the same port: replicas reconnect by themselves and republish their
	// bookings, so every replica converges on all of them.
	startNATS(t, ns.port)
	waitSameLoads(t, uint64(booked), a, b, c)

	// Sync keeps working in every direction.
	book(t, c, "after", 40)
	waitSameLoads(t, uint64(booked+1), a, b, c)
	for _, id := range []string{"pre-outage", "outage-a", "outage-b", "outage-c", "outage-a2", "after"} {
		a.must(t, http.StatusOK, "DELETE", "/reservations/"+id, nil, nil)
	}
	waitSameLoads(t, 0, a, b, c)
}

func TestClusterEmbeddedNATS(t *testing.T) {
	needBinaries(t)
	ids := []string{"a", "b", "c"}
	clientPort := map[string]int{}
	routePort := map[string]int{}
	for _, id := range ids {
		clientPort[id], routePort[id] = freePort(t), freePort(t)
	}
	flags := func(id string) []string {
		var routes []string
		for _, o := range ids {
			if o != id {
				routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(routePort[o]))
			}
		}
		return []string{
			"--nats-listen", "127.0.0.1:" + strconv.Itoa(clientPort[id]),
			"--nats-cluster-listen", "127.0.0.1:" + strconv.Itoa(routePort[id]),
			"--nats-cluster-routes", strings.Join(routes, ","),
		}
	}
	a, b, c := startTrio(t, flags)
	lifecycleScenario(t, a, b, c)

	// Outage of one NATS node: C (and the server it embeds) is killed. A and B keep syncing
	// through their own route; C's bookings made before the crash are released by A and B once
	// C's heartbeats have stopped for the dead-peer interval (and would be, at the latest, when
	// C comes back with a new boot id).
	book(t, c, "c-before-crash", 50)
	book(t, a, "a-before-crash", 51)
	waitSameLoads(t, 2, a, b, c)
	c.p.kill(t)
	book(t, a, "a-during", 52)
	book(t, b, "b-during", 53)
	// c-before-crash is released once C has been silent for --peer-dead-after (3 s).
	waitSameLoads(t, 3, a, b)
	c.start(t)
	registerCatalog(t, c)
	// C learns the live bookings of A and B from their republish on its rejoin; A and B drop
	// c-before-crash (its owner restarted). Three bookings remain, everywhere.
	waitSameLoads(t, 3, a, b, c)
	book(t, c, "c-after", 54)
	waitSameLoads(t, 4, a, b, c)
}
