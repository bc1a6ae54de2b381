package core

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/kvselect/kvselect/bus"
	"github.com/kvselect/kvselect/core/engine"
)

// Config is the one configuration of a Service: the router (engine, router queue, policy
// classes, table limits), KV-event ingestion, replication, startup recovery and the sweep.
// ConfigFromEnv (Dynamo's DYN_ROUTER_* variables) and the kvselect flags both parse into it;
// Validate checks it, naming the flag or variable at fault. New fills zero fields from
// DefaultConfig before validating, so Config{Engine: engine.DefaultConfig()} is enough for tests.
type Config struct {
	// Engine is the router configuration (Dynamo's KvRouterConfig), including the router
	// queue (QueueThreshold, PolicyConfig), KV-event use (UseKVEvents) and the table limits
	// (Limits). Start from engine.DefaultConfig or ConfigFromEnv.
	Engine engine.Config
	// ReplicaID names this replica on the bus (a Dynamo-style "tcp://host:port" is fine).
	ReplicaID string
	// SweepInterval is how often expired bookings, approximate-index entries and stale pending
	// selections are reclaimed (--sweep-interval, default 10 s).
	SweepInterval time.Duration
	// MaxKVListeners bounds the KV-event listeners (--max-kv-listeners; 0: DefaultMaxKVListeners,
	// negative: none); see kvingest_limits.go.
	MaxKVListeners int
	// Replication configures replica sync; it takes effect when New is given a transport
	// (WithTransport).
	Replication ReplicationConfig
	// Recovery configures startup index recovery, run by Run when Recovery.Enabled.
	Recovery RecoveryConfig

	// Logger receives the service's logs (default: discard).
	Logger *slog.Logger
	// Clock returns the current time (default time.Now). Tests inject a fake clock.
	Clock func() time.Time
	// Seed seeds the engine's random source; 0 draws a seed from crypto/rand.
	Seed uint64
	// Scoring adds custom scorers and a custom picker to selection (engine.Scoring documents
	// the pipeline and the contract for implementations).
	Scoring engine.Scoring
}

// DefaultConfig is Dynamo's router defaults with kvselect's service defaults (withDefaults): a
// 10 s sweep, NATS recovery in auto mode (recovery itself off until Recovery.Enabled), default
// limits, a discarding logger.
func DefaultConfig() Config { return Config{Engine: engine.DefaultConfig()}.withDefaults() }

// withDefaults fills the zero fields New accepts as "default".
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = 10 * time.Second
	}
	if c.Replication.Bus.MaxMembers == 0 {
		c.Replication.Bus.MaxMembers = bus.DefaultMaxMembers
	}
	if c.Recovery.NATS == "" {
		c.Recovery.NATS = NATSRecoveryAuto
	}
	d := engine.DefaultLimits()
	if l := &c.Engine.Limits; l.IndexHeadroom == 0 {
		l.IndexHeadroom = d.IndexHeadroom
	}
	if l := &c.Engine.Limits; l.ApproxPruneRatio == 0 {
		l.ApproxPruneRatio = d.ApproxPruneRatio
	}
	return c
}

// Validate checks the whole configuration. Errors about the service's own settings name the
// kvselect flag (and the router's the Dynamo setting), so that the binary can print them as
// they are.
func (c *Config) Validate() error {
	if c.SweepInterval <= 0 {
		return fmt.Errorf("--sweep-interval must be positive, got %v", c.SweepInterval)
	}
	switch m := c.Recovery.NATS; m {
	case NATSRecoveryAuto, NATSRecoveryOff, NATSRecoveryForce:
	default:
		return fmt.Errorf("--nats-recovery: core: --nats-recovery must be auto, off or force: %q", m)
	}
	if l := c.Engine.Limits; l.IndexHeadroom < 1 {
		return fmt.Errorf("--index-headroom must be at least 1")
	} else if !(l.ApproxPruneRatio > 0 && l.ApproxPruneRatio < 1) {
		return fmt.Errorf("--approx-prune-ratio must be between 0 and 1")
	}
	if err := c.Replication.validate(); err != nil {
		return err
	}
	return c.Engine.Validate()
}

// validate checks the replication settings (the flags that set them are named).
func (r *ReplicationConfig) validate() error {
	if r.Bus.DeadAfter < 0 {
		return fmt.Errorf("--peer-dead-after must not be negative")
	}
	if r.Bus.MaxMembers < 1 {
		return fmt.Errorf("--bus-max-members must be at least 1")
	}
	for _, p := range r.Bus.Peers {
		if err := ValidatePeerEndpoint(p); err != nil {
			return fmt.Errorf("invalid replica peer endpoint `%s`: %w", p, err)
		}
	}
	return nil
}

// Option customises a Service at construction.
type Option func(*Service)

// WithReplicator enables replica synchronisation through a custom Replicator r.
func WithReplicator(r Replicator) Option { return func(s *Service) { s.repl = r } }

// WithTransport makes New wire the service to its peers over tr (bus.NewNATSTransport for a
// NATS connection, bus.NewMemNetwork().Connect() in memory) as Config.Replication says. The service owns the
// replicator (Close closes it) but not tr: close the transport's connection after Close.
func WithTransport(tr bus.Transport) Option { return func(s *Service) { s.tr = tr } }
