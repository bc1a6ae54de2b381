package core

import (
	"errors"
	"fmt"
	"os"

	"github.com/kvselect/kvselect/core/engine"
)

// loadPolicies reads and validates the router policy classes of cfg.PolicyConfig
// (DYN_ROUTER_POLICY_CONFIG; schema and rules: engine.ParsePolicies). nil without a file.
func loadPolicies(cfg *engine.Config) (*engine.Policies, error) {
	if cfg.PolicyConfig == "" {
		return nil, nil
	}
	b, err := os.ReadFile(cfg.PolicyConfig)
	if err != nil {
		return nil, fmt.Errorf("failed to read router policy config %s: %w", cfg.PolicyConfig, err)
	}
	ps, err := engine.ParsePolicies(b)
	if err != nil {
		if errors.Is(err, engine.ErrPolicyInvalid) {
			return nil, err
		}
		return nil, fmt.Errorf("failed to parse router policy config %s: %w", cfg.PolicyConfig, err)
	}
	return ps, nil
}
