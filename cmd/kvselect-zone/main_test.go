package main

import (
	"testing"

	"github.com/kvselect/kvselect/core/scoretest"

	"github.com/kvselect/kvselect/core"
)

// The example scorer honours the Scorer contract.
func TestSameZoneConforms(t *testing.T) { scoretest.Scorer(t, core.ScorerFunc(sameZone)) }
