package mockworker

import (
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"

	"github.com/kvselect/kvselect/bus/kvlisten"
	"github.com/kvselect/kvselect/integration/fleet"
)

// Defaults applied by New to zero-valued Config fields. Block size, cache size, replay buffer
// and high-water mark follow vLLM's and the Dynamo mocker's defaults where they have one.
const (
	DefaultBlockSize       = 16
	DefaultNumGPUBlocks    = 16384
	DefaultReplayBuffer    = 10000  // vLLM buffer_steps
	DefaultHWM             = 100000 // vLLM hwm
	DefaultMaxTokens       = 16     // vLLM's completions default for max_tokens
	DefaultMaxPromptTokens = 1 << 20
	// DefaultKVEventsEndpoint binds a random loopback port per rank.
	DefaultKVEventsEndpoint = "tcp://127.0.0.1:0"
)

// Config configures a Worker. The zero value is usable: one rank, 16-token blocks, 16384
// blocks, a random loopback PUB port, no replay endpoint, real time.
type Config struct {
	// BlockSize is the KV block size in tokens.
	BlockSize int
	// NumGPUBlocks is each rank's cache capacity in blocks.
	NumGPUBlocks int
	// DPSize is the number of data-parallel ranks; DPStartRank the global rank of the first.
	// Batches carry the global rank as data_parallel_rank.
	DPSize      int
	DPStartRank int
	// KVEventsEndpoint is rank 0's PUB bind endpoint (tcp://host:port, ipc://path or
	// inproc://name; host "*" binds every interface). Rank i binds port+i for tcp (port 0
	// stays 0: a random port each) and the name with suffix "_dp<i>" otherwise, as vLLM does.
	KVEventsEndpoint string
	// ReplayEndpoint is rank 0's ROUTER replay bind endpoint, offset per rank the same way;
	// empty disables replay. With DPSize > 1 choose ports that do not overlap the PUB range.
	ReplayEndpoint string
	// Topic is frame 0 of every live message and replay reply.
	Topic string
	// ReplayBuffer is how many recent batches each rank keeps for replay.
	ReplayBuffer int
	// HWM is the PUB send queue high-water mark in messages (go-zeromq drops beyond it).
	HWM int
	// Speedup runs model time this many times faster than the Clock (sleeps are divided by
	// it; reported times are not).
	Speedup float64
	// HashSeed seeds engine block hashes (DefaultHashSeed when 0).
	HashSeed uint64
	// MaxPromptTokens bounds a request's prompt length.
	MaxPromptTokens int
	// DefaultMaxTokens is used when a request gives no max_tokens.
	DefaultMaxTokens int
	// Model names the engine preset whose timing the worker charges (fleet.PresetNames;
	// "" is fleet.PresetLegacy, the Dynamo mocker's polynomials). See the package doc.
	Model string
	// Clock is the time source (RealClock when nil).
	Clock Clock
	// Logger receives diagnostics (discarded when nil).
	Logger *slog.Logger
}

// withDefaults returns c with zero fields defaulted, or an error wrapping ErrInvalidConfig.
func (c Config) withDefaults() (Config, error) {
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setInt(&c.BlockSize, DefaultBlockSize)
	setInt(&c.NumGPUBlocks, DefaultNumGPUBlocks)
	setInt(&c.DPSize, 1)
	setInt(&c.ReplayBuffer, DefaultReplayBuffer)
	setInt(&c.HWM, DefaultHWM)
	setInt(&c.MaxPromptTokens, DefaultMaxPromptTokens)
	setInt(&c.DefaultMaxTokens, DefaultMaxTokens)
	if c.Speedup == 0 {
		c.Speedup = 1
	}
	if c.HashSeed == 0 {
		c.HashSeed = DefaultHashSeed
	}
	if c.KVEventsEndpoint == "" {
		c.KVEventsEndpoint = DefaultKVEventsEndpoint
	}
	if c.Clock == nil {
		c.Clock = RealClock{}
	}
	if c.Model == "" {
		c.Model = fleet.PresetLegacy
	}
	if _, err := fleet.Preset(c.Model); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.BlockSize < 0, c.NumGPUBlocks < 0, c.ReplayBuffer < 0, c.HWM < 0, c.MaxPromptTokens < 0, c.DefaultMaxTokens < 0:
		return c, fmt.Errorf("%w: sizes must not be negative", ErrInvalidConfig)
	case c.DPSize < 1 || c.DPSize > 1024:
		return c, fmt.Errorf("%w: dp size %d outside [1, 1024]", ErrInvalidConfig, c.DPSize)
	case c.DPStartRank < 0 || int64(c.DPStartRank)+int64(c.DPSize) > math.MaxInt32:
		return c, fmt.Errorf("%w: dp start rank %d out of range", ErrInvalidConfig, c.DPStartRank)
	case math.IsNaN(c.Speedup) || math.IsInf(c.Speedup, 0) || c.Speedup <= 0:
		return c, fmt.Errorf("%w: speedup must be a positive finite number", ErrInvalidConfig)
	}
	for i := range c.DPSize {
		for _, ep := range []string{c.KVEventsEndpoint, c.ReplayEndpoint} {
			if ep == "" {
				continue
			}
			if _, err := RankEndpoint(ep, i); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// RankEndpoint returns the endpoint of the rank at offset from a base endpoint: tcp ports are
// offset (port 0 stays 0), ipc and inproc names get the suffix "_dp<offset>" (none at offset
// 0). The base must pass kvlisten.ValidateEndpoint. Errors wrap ErrInvalidConfig.
func RankEndpoint(ep string, offset int) (string, error) {
	if err := kvlisten.ValidateEndpoint(ep); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if offset == 0 {
		return ep, nil
	}
	if !strings.HasPrefix(ep, "tcp://") {
		return ep + "_dp" + strconv.Itoa(offset), nil
	}
	i := strings.LastIndexByte(ep, ':')
	port, _ := strconv.Atoi(ep[i+1:]) // validated: a u16
	if port == 0 {
		return ep, nil
	}
	if port+offset > math.MaxUint16 {
		return "", fmt.Errorf("%w: %s: port %d + rank offset %d exceeds 65535", ErrInvalidConfig, ep, port, offset)
	}
	return ep[:i+1] + strconv.Itoa(port+offset), nil
}
