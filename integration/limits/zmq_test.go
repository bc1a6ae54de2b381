package limits

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/bus/kvevents"
	"github.com/kvselect/kvselect/internal/poll"
)

// hostilePub is a ZMQ PUB on a loopback port speaking vLLM's KV-event frames
// [topic, seq (8 bytes big-endian), payload], with methods to misbehave.
type hostilePub struct {
	t   *testing.T
	pub zmq4.Socket
	ep  string
	seq uint64
}

func newHostilePub(t *testing.T) *hostilePub {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := "tcp://" + ln.Addr().String()
	ln.Close()
	pub := zmq4.NewPub(context.Background())
	if err := pub.Listen(ep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return &hostilePub{t: t, pub: pub, ep: ep}
}

// waitSubscribed polls until a subscriber has subscribed.
func (p *hostilePub) waitSubscribed() {
	poll.True(p.t, 60*time.Second, "kvselect subscribed to the hostile publisher", func() bool {
		tp, ok := p.pub.(zmq4.Topics)
		return ok && len(tp.Topics()) > 0
	})
}

// send publishes one raw payload with the next sequence number (or seq when given).
func (p *hostilePub) send(payload []byte) {
	var seqb [8]byte
	binary.BigEndian.PutUint64(seqb[:], p.seq)
	p.seq++
	_ = p.pub.SendMulti(zmq4.NewMsgFrom([]byte{}, seqb[:], payload))
}

// storedBatch is one batch of n distinct, valid stored blocks (block size 16), chained from
// the root, numbered from first.
func storedBatch(first, n int) []byte {
	ev := kvevents.Event{Kind: kvevents.KindBlockStored, BlockSize: 16}
	ev.BlockHashes = make([]uint64, n)
	ev.TokenIDs = make([]uint32, 16*n)
	for i := range n {
		ev.BlockHashes[i] = uint64(first+i)*0x9e3779b97f4a7c15 | 1
		for j := range 16 {
			ev.TokenIDs[i*16+j] = uint32(first + i*16 + j)
		}
	}
	return kvevents.AppendBatch(nil, &kvevents.Batch{TS: 1, Events: []kvevents.Event{ev}})
}

// labeled returns the value of the first metric line named name whose labels contain sub.
func (s *server) labeled(name, sub string) float64 {
	_, b, err := s.call("GET", "/metrics", nil)
	if err != nil {
		return -1
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
	for _, line := range strings.Split(string(b), "\n") {
		if m := re.FindStringSubmatch(line); m != nil && strings.Contains(m[1], sub) {
			f, _ := strconv.ParseFloat(m[2], 64)
			return f
		}
	}
	return -1
}

// hostileZMQ drives a kvselect with one worker (total_kv_blocks 4096) whose KV-event publisher
// floods valid blocks (flood of them), then sends garbage, huge frames and sequence jumps, while
// a client selects. It returns the index entries after the flood, failed selections and peak RSS.
func hostileZMQ(t *testing.T, flood int) (entries float64, failed int, base, peak int64, evicted float64) {
	s := startServer(t, nil)
	pub := newHostilePub(t)
	code, body, err := s.call("POST", "/workers", map[string]any{
		"worker_id": 1, "endpoint": "http://w1:8000", "kv_events_endpoint": pub.ep, "block_size": 16, "total_kv_blocks": 4096,
	})
	if err != nil || code/100 != 2 {
		t.Fatalf("register: %d %s %v", code, body, err)
	}
	pub.waitSubscribed()
	base = s.rssKiB()
	stop := make(chan struct{})
	done := make(chan latencies)
	go func() {
		var all latencies
		for {
			select {
			case <-stop:
				done <- all
				return
			default:
			}
			l := selectLoop(s, 500*time.Millisecond)
			all.n += l.n
			all.failed += l.failed
		}
	}()
	const per = 2000
	for i := 0; i < flood; i += per {
		pub.send(storedBatch(i, per))
		if i%(50*per) == 0 {
			peak = max(peak, s.rssKiB())
		}
	}
	// Wait until the flood is applied: the stored-block counter stops short of nothing.
	poll.True(t, 120*time.Second, "flood applied", func() bool {
		peak = max(peak, s.rssKiB())
		return s.labeled("kvselect_kv_blocks_total", `kind="stored"`) >= float64(flood)*0.99
	})
	entries = s.labeled("kvselect_index_entries", `model_name="default"`)
	evicted = s.labeled("kvselect_limit_events_total", `limit="index_rank_blocks"`)
	// Garbage, a huge frame, sequence jumps.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		g := make([]byte, rng.IntN(512))
		for i := range g {
			g[i] = byte(rng.Uint32())
		}
		pub.send(g)
	}
	pub.send(make([]byte, 64<<20))
	pub.seq += 1_000_000
	pub.send(storedBatch(flood+10, 10))
	pub.seq -= 500_000
	pub.send(storedBatch(flood+20, 10))
	poll.True(t, 60*time.Second, "garbage counted", func() bool {
		return s.metric("kvselect_kv_undecodable_batches_total") >= 1000
	})
	peak = max(peak, s.peakKiB())
	close(stop)
	l := <-done
	if l.n == 0 {
		t.Fatal("no selections ran")
	}
	return entries, l.failed, base, peak, evicted
}

// TestHostileZMQPublisher (CI size): a flood of 40,000 valid blocks for a worker that declared
// 4,096 leaves at most 5,120 entries (the rank budget acted), garbage and a 64 MiB frame change
// nothing but counters, and no selection fails.
func TestHostileZMQPublisher(t *testing.T) {
	entries, failed, base, peak, evicted := hostileZMQ(t, 40_000)
	t.Logf("valid-block flood 40k + garbage/huge frame/seq jumps: index entries %v (budget 5120), evicted %v, failed selections %d, RSS base %d MiB peak %d MiB",
		entries, evicted, failed, base/mib, peak/mib)
	if entries > 5120 || evicted < 40_000-5120 {
		t.Errorf("index entries %v, evicted %v: the rank budget did not act", entries, evicted)
	}
	if failed != 0 {
		t.Errorf("%d selections failed", failed)
	}
	_ = fmt.Sprint
}
