package kvlisten

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
)

// Listener follows one engine publisher. Create it with Start and release it
// with Close. See the package documentation for the sequence and restart
// rules and the concurrency model.
type Listener struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context // ends on Close or when the Start context ends
	cancel context.CancelFunc
	wg     sync.WaitGroup // receiver + processor
	in     chan liveMsg   // receiver → processor, capacity cfg.QueueLen
	budget *byteBudget    // payload bytes in in or being handled, at most cfg.QueueBytes
	state  stateBox

	closeOnce sync.Once

	// Processor-owned fields: touched only by the processor goroutine.
	rp       *replayer // nil without a replay endpoint
	wm       watermark
	epoch    uint64 // connection epoch of the last processed batch
	seed     maphash.Seed
	lastHash uint64 // hash of the payload applied as wm.w, valid while wm.set (replay only)
}

// Start validates cfg, applies defaults and starts the listener's goroutines.
// It does not wait for the engine: the SUB keeps dialling in the background
// and State reports progress. The listener stops when ctx ends or Close is
// called; Close must be called in either case to wait for the goroutines.
// Errors wrap ErrInvalidConfig.
func Start(ctx context.Context, cfg Config) (*Listener, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := registerTransports(); err != nil {
		return nil, fmt.Errorf("%w: register transports: %w", ErrInvalidConfig, err)
	}
	lctx, cancel := context.WithCancel(ctx)
	l := &Listener{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "kvlisten", "endpoint", cfg.Endpoint),
		ctx:    lctx,
		cancel: cancel,
		in:     make(chan liveMsg, cfg.QueueLen),
		budget: newByteBudget(int64(cfg.QueueBytes)),
		seed:   maphash.MakeSeed(),
	}
	if cfg.ReplayEndpoint != "" {
		l.rp = &replayer{
			ep:         cfg.ReplayEndpoint,
			timeout:    cfg.ReplayTimeout,
			maxMessage: cfg.MaxMessageBytes,
			log:        l.log,
			onMalformed: func(err error) {
				l.state.update(func(s *State) { s.Malformed++ })
				l.log.Warn("kv events: malformed replay reply", "err", err)
			},
		}
	}
	if cfg.Gate == nil {
		l.state.setGateOpen()
	}
	l.wg.Add(2)
	go l.receive()
	go l.process()
	return l, nil
}

// Close stops the listener, closes its sockets and waits for its goroutines.
// It is prompt even while a dial, receive or replay is blocked, and safe to
// call more than once and from any goroutine (but not from a Handler
// callback, which would deadlock waiting for itself). It always returns nil.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		l.wg.Wait()
		l.state.setClosed()
	})
	return nil
}

// State returns a copy of the listener's status and counters. Safe from any
// goroutine.
func (l *Listener) State() State {
	s := l.state.snapshot()
	s.QueuedBytes = l.budget.used()
	if l.ctx.Err() != nil {
		s.Status, s.QueuedBytes = StatusClosed, 0
	}
	return s
}

// Endpoint returns the PUB endpoint this listener follows.
func (l *Listener) Endpoint() string { return l.cfg.Endpoint }
