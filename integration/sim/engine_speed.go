package sim

import "github.com/kvselect/kvselect/core/engine"

// Engine returns the policy's selection engine, for inspection after a run (learned worker
// speed in Loads, index contents). Calling its mutators during a run breaks the simulation.
func (p *EnginePolicy) Engine() *engine.Engine { return p.eng }
