package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/internal/tcpproxy"
)

// Bus fault scenarios (issue 15 item 6, the bus part), run with real processes: kvselect
// replicas and nats-server as child processes, a TCP proxy in the test process for partitions.
// Each scenario keeps a /select load running against every live replica during the fault and
// reports failed requests (must be 0), the convergence time after the fault heals (or after it
// starts, for a peer that never returns) and the replicas' peak RSS (VmHWM).
//
// Sizes: busFaultScale picks the full sizes behind the `fault` build tag (fault_bus_full_test.go:
// NATS down 10 s, 100k forged messages) and CI sizes otherwise (fault_bus_ci_test.go).
//
//	go test -tags fault -run 'TestBusFault' -v ./integration/   # full suite

// busFaultSizes are the knobs of one run of the suite.
type busFaultSizes struct {
	natsDown  time.Duration // how long NATS stays killed
	partition time.Duration // how long the black hole lasts
	storm     int           // forged messages per storm
}

// busFaultReport is what a scenario measured.
type busFaultReport struct {
	name        string
	requests    int64
	failed      int64
	convergence time.Duration
	peakRSSKiB  map[string]int64
}

func (r busFaultReport) log(t *testing.T) {
	t.Helper()
	var rss []string
	for id, kib := range r.peakRSSKiB {
		rss = append(rss, fmt.Sprintf("%s=%.1fMiB", id, float64(kib)/1024))
	}
	t.Logf("FAULT %s: requests=%d failed=%d convergence=%v peak_rss[%s]", r.name, r.requests, r.failed,
		r.convergence.Round(time.Millisecond), strings.Join(rss, " "))
	if r.failed != 0 {
		t.Errorf("%s: %d of %d selections failed during the fault", r.name, r.failed, r.requests)
	}
}

// selectLoad runs POST /select against every replica in rs until stop, counting failures.
type selectLoad struct {
	requests, failed atomic.Int64
	stop             chan struct{}
	wg               sync.WaitGroup
}

func startSelectLoad(rs ...*replica) *selectLoad {
	l := &selectLoad{stop: make(chan struct{})}
	for _, r := range rs {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				code, _ := r.call("POST", "/select", map[string]any{"token_ids": prompt(i % 64)}, nil)
				l.requests.Add(1)
				if code != http.StatusOK {
					l.failed.Add(1)
				}
				time.Sleep(5 * time.Millisecond) // pace the load (not synchronisation)
			}
		}()
	}
	return l
}

func (l *selectLoad) finish() (requests, failed int64) {
	close(l.stop)
	l.wg.Wait()
	return l.requests.Load(), l.failed.Load()
}

// peakRSSKiB reads VmHWM (peak resident set) of a live process from /proc; 0 where unavailable.
func peakRSSKiB(p *proc) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "status"))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func rssOf(rs ...*replica) map[string]int64 {
	out := map[string]int64{}
	for _, r := range rs {
		if done, _ := r.p.exited(); !done {
			out[r.id] = peakRSSKiB(r.p)
		}
	}
	return out
}

// metricValue sums the samples of a Prometheus metric on r whose label text contains every
// one of labels.
func metricValue(t testing.TB, r *replica, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(r.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}

// bookN books n selections named prefix-i on r.
func bookN(t *testing.T, r *replica, prefix string, n int) {
	t.Helper()
	for i := range n {
		book(t, r, fmt.Sprintf("%s-%d", prefix, i), 100+i)
	}
}

// pairOverNATS starts replicas a and b peering over the external server url(s) given per id.
func pairOverNATS(t *testing.T, urlA, urlB string, extra ...string) (a, b *replica) {
	t.Helper()
	a = startReplica(t, "a", append([]string{"--nats-url", urlA, "--replica-sync-peers", "b"}, extra...)...)
	b = startReplica(t, "b", append([]string{"--nats-url", urlB, "--replica-sync-peers", "a"}, extra...)...)
	for _, r := range []*replica{a, b} {
		registerCatalog(t, r)
	}
	waitMembers(t, a, "b")
	waitMembers(t, b, "a")
	return a, b
}

// faultNATSKilled: NATS is killed for sz.natsDown while both replicas serve; it comes back on
// the same port and the replicas converge on every booking, including those made meanwhile.
func faultNATSKilled(t *testing.T, sz busFaultSizes) {
	ns := startNATS(t, 0)
	a, b := pairOverNATS(t, ns.url(), ns.url())
	bookN(t, a, "pre", 3)
	waitSameLoads(t, 3, a, b)
	load := startSelectLoad(a, b)
	ns.p.kill(t)
	down := time.Now()
	for time.Since(down) < sz.natsDown {
		time.Sleep(100 * time.Millisecond) // the outage itself: selections keep running
	}
	bookN(t, b, "during", 2)
	startNATS(t, ns.port)
	healed := time.Now()
	waitSameLoads(t, 5, a, b)
	conv := time.Since(healed)
	req, failed := load.finish()
	busFaultReport{name: fmt.Sprintf("nats-killed-%v", sz.natsDown), requests: req, failed: failed,
		convergence: conv, peakRSSKiB: rssOf(a, b)}.log(t)
}

// faultReplicaKilled: b is killed with SIGKILL (no leave). Without a restart, a releases b's
// bookings after the dead-peer interval; with a restart under the same id, a drops b's old
// bookings on the new boot id and both converge.
func faultReplicaKilled(t *testing.T, restart bool) {
	ns := startNATS(t, 0)
	a, b := pairOverNATS(t, ns.url(), ns.url())
	bookN(t, a, "a", 2)
	bookN(t, b, "b", 3)
	waitSameLoads(t, 5, a, b)
	load := startSelectLoad(a)
	b.p.kill(t)
	killed := time.Now()
	name := "replica-kill9-no-restart"
	if restart {
		name = "replica-kill9-restart"
		b.start(t)
		registerCatalog(t, b)
	}
	waitSameLoads(t, 2, a) // only a's own bookings remain counted on a
	conv := time.Since(killed)
	if restart {
		waitSameLoads(t, 2, a, b)
		conv = time.Since(killed)
	}
	if got := metricValue(t, a, "kvselect_bus_dead_peer_bookings_released_total"); !restart && got != 3 {
		t.Errorf("a released %v dead-peer bookings, want 3", got)
	}
	req, failed := load.finish()
	busFaultReport{name: name, requests: req, failed: failed, convergence: conv, peakRSSKiB: rssOf(a, b)}.log(t)
}

// faultPartition: b reaches NATS through a TCP proxy that turns into a black hole (no byte
// moves, no connection closes) for sz.partition. a releases b's bookings after the dead-peer
// interval; when the black hole ends, b is re-admitted and both converge.
func faultPartition(t *testing.T, sz busFaultSizes) {
	ns := startNATS(t, 0)
	proxy := tcpproxy.New(t, "127.0.0.1:"+strconv.Itoa(ns.port))
	a, b := pairOverNATS(t, ns.url(), proxy.URL())
	bookN(t, b, "b", 3)
	waitSameLoads(t, 3, a, b)
	load := startSelectLoad(a, b)
	proxy.Pause()
	began := time.Now()
	waitSameLoads(t, 0, a)
	released := time.Since(began)
	for time.Since(began) < sz.partition {
		time.Sleep(100 * time.Millisecond) // the partition itself
	}
	proxy.Resume()
	healed := time.Now()
	waitSameLoads(t, 3, b, a)
	conv := time.Since(healed)
	req, failed := load.finish()
	t.Logf("partition: a released b's bookings %v after the black hole began", released.Round(time.Millisecond))
	busFaultReport{name: fmt.Sprintf("tcp-blackhole-%v", sz.partition), requests: req, failed: failed,
		convergence: conv, peakRSSKiB: rssOf(a, b)}.log(t)
}

// faultForgedStorm: a runs the embedded NATS server with bus authentication; b connects to it
// with the shared secret. An unauthorised client is refused at CONNECT; an authorised one (it
// holds the secret and connects as its own replica id) publishes sz.storm forged heartbeats,
// frees and live sets claiming b, on its own subjects and on b's and v1 subjects: NATS refuses
// the latter, a drops the former and counts them; nothing changes and the log stays small.
func faultForgedStorm(t *testing.T, sz busFaultSizes) {
	const secret = "fault-suite-secret-0123456789abcdef0123456789"
	authFile := filepath.Join(t.TempDir(), "auth.yaml")
	if err := os.WriteFile(authFile, []byte("secret: "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	natsPort := freePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(natsPort)
	a := startReplica(t, "a", "--nats-listen", "127.0.0.1:"+strconv.Itoa(natsPort), "--nats-auth-file", authFile,
		"--replica-sync-peers", "b", "--discover-peers", "--log-level", "info")
	b := startReplica(t, "b", "--nats-url", url, "--nats-auth-file", authFile, "--replica-sync-peers", "a", "--log-level", "info")
	for _, r := range []*replica{a, b} {
		registerCatalog(t, r)
	}
	waitMembers(t, a, "b")
	waitMembers(t, b, "a")
	bookN(t, b, "b", 3)
	waitSameLoads(t, 3, a, b)
	before := waitMembers(t, a, "b")
	load := startSelectLoad(a, b)

	// Unauthorised: refused at CONNECT.
	if nc, err := nats.Connect(url, nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to the authenticated embedded server")
	}
	// Authorised forger.
	const forger = "tcp://forger:9092"
	nc, err := nats.Connect(url, nats.UserInfo(forger, bus.ReplicaPassword(secret, forger)), nats.NoReconnect(),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subj, _ := bus.NewSubjects("it")
	// Forged heartbeats (new boot ids: each would be a restart of b) go on the forger's members
	// subject; forged frees and empty live sets (each would release b's bookings) on its
	// lifecycle subject.
	var beats, events [][]byte
	for i := range 8 {
		boot := uint64(1000 + i)
		for _, m := range []bus.Message{
			&bus.Heartbeat{Sender: "b", BootID: boot},
			&bus.Lifecycle{Sender: "b", BootID: boot, Model: "m", RequestID: "b-0", Kind: bus.LifecycleFree},
			&bus.LiveSet{Sender: "b", BootID: boot, SetID: uint64(i), Chunks: 1},
		} {
			raw, err := bus.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if m.Type() == bus.TypeHeartbeat {
				beats = append(beats, raw)
			} else {
				events = append(events, raw)
			}
		}
	}
	began := time.Now()
	for i := range sz.storm {
		subject, data := subj.MembersFrom(forger), beats[i%len(beats)]
		if i%2 == 1 {
			subject, data = subj.LifecycleFrom(forger), events[i%len(events)]
		}
		if err := nc.Publish(subject, data); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 0 { // and some on subjects NATS refuses to the forger
			_ = nc.Publish(subj.MembersFrom("b"), beats[0])
			_ = nc.Publish(subj.Members(), beats[0])
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, syncTimeout, func() error {
		if got := metricValue(t, a, "kvselect_bus_messages_dropped_total", `reason="impersonation"`); got < float64(sz.storm) {
			return fmt.Errorf("a counted %v impersonations of %d", got, sz.storm)
		}
		return nil
	})
	conv := time.Since(began)
	after := waitMembers(t, a, "b")
	if after[0].BootID != before[0].BootID {
		t.Fatalf("b's boot id on a changed from %d to %d", before[0].BootID, after[0].BootID)
	}
	waitSameLoads(t, 3, a, b)
	req, failed := load.finish()
	logLines := countLines(t, a.p.log)
	t.Logf("forged storm: %d messages; a's log has %d lines", sz.storm, logLines)
	if logLines > 1000 {
		t.Errorf("a wrote %d log lines for a storm of %d forged messages", logLines, sz.storm)
	}
	busFaultReport{name: fmt.Sprintf("forged-storm-%d", sz.storm), requests: req, failed: failed,
		convergence: conv, peakRSSKiB: rssOf(a, b)}.log(t)
}

// countLines counts the lines of a log file and logs the most frequent messages.
func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	byMsg := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.Index(line, "msg="); i >= 0 {
			msg := line[i+4:]
			if strings.HasPrefix(msg, `"`) {
				if j := strings.Index(msg[1:], `"`); j >= 0 {
					msg = msg[:j+2]
				}
			} else if j := strings.IndexByte(msg, ' '); j >= 0 {
				msg = msg[:j]
			}
			byMsg[msg]++
		}
	}
	for msg, n := range byMsg {
		if n >= 10 {
			t.Logf("log: %d × %s", n, msg)
		}
	}
	return bytes.Count(b, []byte{'\n'})
}
