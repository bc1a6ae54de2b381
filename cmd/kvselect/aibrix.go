package main

import (
	"log/slog"
	"net/http"

	"github.com/kvselect/kvselect/core"
	"github.com/kvselect/kvselect/http/aibrix"
	"github.com/kvselect/kvselect/http/aibrix/aibrixcheck"
	"github.com/kvselect/kvselect/http/aibrix/aibrixcore"
	"github.com/kvselect/kvselect/internal/authtoken"
)

func init() {
	// `kvselect aibrix-check --url URL` runs the AIBrix conformance checker against any
	// decision service.
	subcommands["aibrix-check"] = aibrixcheck.Main
}

// aibrixHandler builds the AIBrix decision endpoint: operator policy and bearer tokens from
// their files (validated at startup), kvselect's own load accounting as the backend, and —
// when the policy names a session key — session bindings in the service's replicated table,
// so a session sticks to one candidate whichever replica the gateway asks. svc must have been
// built with its transport (the table attaches to the replicator).
func aibrixHandler(o *options, svc *core.Service, log *slog.Logger) (http.Handler, error) {
	if err := validateAIBrixPath(o.aibrixPath); err != nil {
		return nil, err
	}
	cfg := aibrix.Config{Path: o.aibrixPath}
	if o.aibrixPolicyFile != "" {
		pol, err := aibrix.LoadPolicy(o.aibrixPolicyFile)
		if err != nil {
			return nil, err
		}
		cfg.Policy = pol
		if pol.SessionKey != "" {
			cfg.Sessions = aibrixcore.Sessions{Table: svc.EnableAIBrixSessions(core.AIBrixSessionConfig{})}
		}
	}
	if o.aibrixTokenFile != "" {
		toks, err := authtoken.Load(o.aibrixTokenFile)
		if err != nil {
			return nil, err
		}
		cfg.Tokens = toks
	}
	return aibrix.NewHandler(cfg, aibrixcore.Backend{Svc: svc}, log.With("component", "aibrix"))
}
