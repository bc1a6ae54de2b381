package engine

// Session affinity is tested by testdata/affinity.txt and testdata/affinity_mode.txt; this file
// keeps the unit case a script cannot reach and the request helper other tests share.

import (
	"errors"
	"testing"
	"time"

	"github.com/kvselect/kvselect/kvwire"
)

// sessReq is a SelectRequest of session over tokens in the default partition.
func sessReq(id, session string, tokens []uint32) *SelectRequest {
	r := selReq(id, tokens)
	r.SessionID = ptr(session)
	return r
}

// TestHardModeRejectsADPRankTheSessionLeft: the rank is part of the binding.
func TestHardModeRejectsADPRankTheSessionLeft(t *testing.T) {
	c := DefaultConfig()
	c.SessionAffinityTTL, c.SessionAffinityMode = 60*time.Second, SessionAffinityHard
	e := newEngine(t, &c)
	mustUpsert(t, e, spec(1))
	p := e.parts[defKey]
	p.sessions["s"] = &binding{owner: kvwire.Owner{Worker: 1, Rank: 1}}
	err := e.checkDispatch(p, "s", kvwire.Owner{Worker: 1, Rank: 0}, t0)
	if !errors.Is(err, ErrBadRequest) || err.Error() != "session s is bound to DP rank 1, not 0" {
		t.Fatalf("err = %v", err)
	}
}
