package core

import (
	"github.com/kvselect/kvselect/core/engine"
	"github.com/kvselect/kvselect/kvwire"
)

// The service speaks the engine's request and response types; these aliases let embedders use
// them without importing the engine package.
type (
	WorkerSpec          = engine.WorkerSpec
	WorkerPatch         = engine.WorkerPatch
	WorkerRecord        = engine.WorkerRecord
	ListenerStatus      = engine.ListenerStatus
	Prompt              = engine.Prompt
	SelectRequest       = engine.SelectRequest
	SelectResponse      = engine.SelectResponse
	ReservationRequest  = engine.ReservationRequest
	ReservationResponse = engine.ReservationResponse
	PromptQuery         = engine.PromptQuery
	SessionContext      = engine.SessionContext
	AffinityTarget      = engine.AffinityTarget
	PinnedWorker        = engine.PinnedWorker
	RoutingConstraints  = engine.RoutingConstraints
	ConfigOverride      = engine.ConfigOverride
	PartitionLoads      = engine.PartitionLoads
	PotentialLoad       = engine.PotentialLoad
	OverlapScores       = engine.OverlapScores
	PartitionKey        = engine.PartitionKey
	Owner               = kvwire.Owner
	ReplicaEvent        = engine.ReplicaEvent
	QueueRejection      = engine.QueueRejection
	EngineConfig        = engine.Config
)

// Sentinel errors. Every error a Service method returns wraps exactly one of them; match with
// errors.Is. The HTTP layer maps them to status codes in one table.
var (
	ErrBadRequest    = engine.ErrBadRequest    // 400
	ErrUnprocessable = engine.ErrUnprocessable // 422
	ErrNotFound      = engine.ErrNotFound      // 404
	ErrConflict      = engine.ErrConflict      // 409
	ErrNotReady      = engine.ErrNotReady      // 503
	ErrNoEndpoints   = engine.ErrNoEndpoints   // 503
	ErrOverloaded    = engine.ErrOverloaded    // 429
	ErrInternal      = engine.ErrInternal      // 500
)

// Readiness is the body of GET /ready.
type Readiness struct {
	Ready              bool           `json:"ready"`
	SchedulableWorkers int            `json:"schedulable_workers"`
	Workers            []WorkerRecord `json:"workers"`
	// Recovery is the startup recovery outcome; absent when no recovery was expected.
	Recovery *RecoveryStatus `json:"recovery,omitempty"`
}

// Extension-point types, re-exported for embedders (see engine/scoring.go for the contract).
type (
	Scoring          = engine.Scoring
	Scorer           = engine.Scorer
	ScorerFunc       = engine.ScorerFunc
	WeightedScorer   = engine.WeightedScorer
	Picker           = engine.Picker
	PickerFunc       = engine.PickerFunc
	Candidate        = engine.Candidate
	ScoredCandidate  = engine.ScoredCandidate
	SelectionContext = engine.SelectionContext
	WorkerInfo       = engine.WorkerInfo
)
