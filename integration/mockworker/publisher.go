package mockworker

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/bus/kvevents"
)

// Record is one published batch as the replay buffer keeps it: its sequence number and the
// exact payload bytes that went out in frame 2.
type Record struct {
	Seq     uint64
	Payload []byte
}

// PublisherStats counts one publisher's activity.
type PublisherStats struct {
	NextSeq     uint64 // sequence number of the next batch
	Sent        uint64 // batches handed to the PUB socket
	DroppedLive uint64 // batches whose live send was suppressed by DropLive
	Buffered    int    // batches currently held for replay
	Replays     uint64 // well-formed replay requests answered
	BadReplays  uint64 // malformed replay requests ignored
}

// publisher is one rank's vLLM-style ZmqEventPublisher: a bound PUB socket, a sequence
// counter starting at 0, and a ring of the last replayBuffer batches served over an optional
// bound ROUTER socket (see replay.go).
//
// Concurrency: mu guards seq, the ring, the counters and every send on pub, so batches leave
// in sequence order. The replay goroutine takes mu only to copy the ring, and sends on router
// without holding it.
type publisher struct {
	topic  []byte
	rank   int32
	clock  Clock
	log    *slog.Logger
	pub    zmq4.Socket
	router zmq4.Socket // nil without replay
	pubEP  string      // bound endpoint, tcp://host:port with the actual port
	repEP  string      // "" without replay
	cancel context.CancelFunc
	wg     sync.WaitGroup // replay goroutine

	mu       sync.Mutex
	seq      uint64
	ring     []Record // circular, len ≤ ringCap
	ringHead int      // index of the oldest record once the ring is full
	ringCap  int
	dropLive int
	stats    PublisherStats
	batch    kvevents.Batch
}

// publisherConfig is what a rank hands to newPublisher.
type publisherConfig struct {
	endpoint, replayEndpoint string // bind endpoints ("" replay = none)
	topic                    string
	rank                     int32
	replayBuffer             int
	hwm                      int
	clock                    Clock
	log                      *slog.Logger
}

// bindRetry bounds how long a bind keeps retrying an address that is still being released
// (a restarted publisher re-binds the port its predecessor just closed).
const bindRetry = 2 * time.Second

// newPublisher binds the PUB socket and, when configured, the replay ROUTER, and starts the
// replay goroutine. Errors wrap ErrBind.
func newPublisher(cfg publisherConfig) (*publisher, error) {
	ctx, cancel := context.WithCancel(context.Background())
	zlog := zmq4.WithLogger(slog.NewLogLogger(cfg.log.Handler(), slog.LevelDebug))
	p := &publisher{
		topic: []byte(cfg.topic), rank: cfg.rank, clock: cfg.clock, log: cfg.log,
		ringCap: cfg.replayBuffer, cancel: cancel,
	}
	p.pub = zmq4.NewPub(ctx, zlog)
	if cfg.hwm > 0 {
		if err := p.pub.SetOption(zmq4.OptionHWM, cfg.hwm); err != nil {
			cancel()
			_ = p.pub.Close()
			return nil, fmt.Errorf("%w: set PUB high-water mark: %w", ErrBind, err)
		}
	}
	var err error
	if p.pubEP, err = listen(p.pub, cfg.endpoint); err != nil {
		cancel()
		_ = p.pub.Close()
		return nil, err
	}
	if cfg.replayEndpoint != "" {
		p.router = zmq4.NewRouter(ctx, zlog, zmq4.WithTimeout(5*time.Second))
		if p.repEP, err = listen(p.router, cfg.replayEndpoint); err != nil {
			cancel()
			_ = p.pub.Close()
			_ = p.router.Close()
			return nil, err
		}
		p.wg.Add(1)
		go p.serveReplay(ctx)
	}
	return p, nil
}

// listen binds s on ep, retrying while the address is in use for up to bindRetry, and returns
// the bound endpoint with its actual port.
func listen(s zmq4.Socket, ep string) (string, error) {
	deadline := time.Now().Add(bindRetry)
	for {
		err := s.Listen(ep)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%w: %s: %w", ErrBind, ep, err)
		}
		time.Sleep(20 * time.Millisecond) // the previous owner of the port is closing
	}
	if a := s.Addr(); a != nil {
		return "tcp://" + a.String(), nil
	}
	return ep, nil
}

// publish encodes events as one KVEventBatch stamped with the clock's time and the rank,
// assigns it the next sequence number, keeps it for replay and sends it live unless DropLive
// says to lose it. The events' slices are only read. It returns the batch's sequence number.
func (p *publisher) publish(events []kvevents.Event) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := p.clock.Now()
	p.batch = kvevents.Batch{
		TS:     float64(ts.UnixNano()) / 1e9,
		Events: events, DPRank: p.rank, HasDPRank: true,
	}
	// A fresh payload per batch: the ring and go-zeromq's send queue both retain it.
	payload := kvevents.AppendBatch(nil, &p.batch)
	p.batch.Events = nil
	seq := p.seq
	p.seq++
	p.keep(Record{Seq: seq, Payload: payload})
	if p.dropLive > 0 {
		p.dropLive--
		p.stats.DroppedLive++
		return seq
	}
	var seqb [8]byte
	binary.BigEndian.PutUint64(seqb[:], seq)
	// go-zeromq's PUB only queues here; it never blocks and drops silently at its HWM, which
	// a subscriber sees as a gap, as with vLLM.
	if err := p.pub.SendMulti(zmq4.NewMsgFrom(p.topic, seqb[:], payload)); err != nil {
		p.log.Warn("mockworker: KV-event send failed", "seq", seq, "err", err)
		return seq
	}
	p.stats.Sent++
	return seq
}

// keep appends r to the replay ring, overwriting the oldest record when full (mu held).
func (p *publisher) keep(r Record) {
	if p.ringCap <= 0 {
		return
	}
	if len(p.ring) < p.ringCap {
		p.ring = append(p.ring, r)
		return
	}
	p.ring[p.ringHead] = r
	p.ringHead = (p.ringHead + 1) % p.ringCap
}

// records returns a copy of the buffered records with Seq ≥ from, oldest first (payloads are
// shared, never modified).
func (p *publisher) records(from uint64) []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Record, 0, len(p.ring))
	for i := range p.ring {
		r := p.ring[(p.ringHead+i)%len(p.ring)]
		if r.Seq >= from {
			out = append(out, r)
		}
	}
	return out
}

// dropNext makes the next n live sends disappear (seq consumed, batch kept for replay).
func (p *publisher) dropNext(n int) {
	p.mu.Lock()
	p.dropLive += n
	p.mu.Unlock()
}

// subscribed reports whether at least one SUB has subscribed (go-zeromq's PUB drops batches
// while nobody has).
func (p *publisher) subscribed() bool {
	t, ok := p.pub.(zmq4.Topics)
	return ok && len(t.Topics()) > 0
}

func (p *publisher) snapshot() PublisherStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.NextSeq = p.seq
	s.Buffered = len(p.ring)
	return s
}

// close closes both sockets and waits for the replay goroutine. Batches still queued in the
// PUB are discarded, as vLLM's linger=0 shutdown does.
//
// Known leak: go-zeromq v0.17.0 never stops a PUB socket's internal writer goroutine (its
// Close does not close the writer), so every closed publisher leaves one idle goroutine
// behind. It holds no socket or port; it matters only to goroutine-leak checks.
func (p *publisher) close() {
	p.cancel()
	_ = p.pub.Close()
	if p.router != nil {
		_ = p.router.Close()
	}
	p.wg.Wait()
}
