package natsembed

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/kvselect/kvselect/bus"
)

// ServerLogger adapts a *slog.Logger to nats-server's six-method Logger
// interface. Notices map to Info, traces to Debug (the server only emits
// them when trace is enabled), and Fatalf logs at Error without exiting:
// an embedded server must never end the process.
//
// Lines at Info and above are rate-limited (serverLogBurst per bus.DefaultLogPeriod, the rest
// counted and summarised on the next line that passes): the server logs every refused publish
// of a client that lacks permission, and such a client must not be able to flood the log.
//
// Concurrency: safe for concurrent use (slog loggers and the limiter are).
type ServerLogger struct {
	log   *slog.Logger
	limit *bus.LogLimiter
}

// serverLogBurst is the embedded server's log budget per bus.DefaultLogPeriod (startup alone
// writes about 15 lines).
const serverLogBurst = 100

var _ server.Logger = ServerLogger{}

// NewServerLogger returns an adapter that logs through l with the attribute
// component=nats-server.
func NewServerLogger(l *slog.Logger) ServerLogger {
	return ServerLogger{log: l.With("component", "nats-server"), limit: bus.NewLogLimiter(serverLogBurst, bus.DefaultLogPeriod)}
}

func (s ServerLogger) logf(level slog.Level, format string, v []any) {
	if !s.log.Enabled(context.Background(), level) {
		return
	}
	if level >= slog.LevelInfo && s.limit != nil {
		s.limit.Log(s.log, level, fmt.Sprintf(format, v...))
		return
	}
	s.log.Log(context.Background(), level, fmt.Sprintf(format, v...))
}

// Suppressed returns how many server log lines the rate limit dropped.
func (s ServerLogger) Suppressed() uint64 {
	if s.limit == nil {
		return 0
	}
	return s.limit.Suppressed()
}

// Noticef implements server.Logger.
func (s ServerLogger) Noticef(format string, v ...any) { s.logf(slog.LevelInfo, format, v) }

// Warnf implements server.Logger.
func (s ServerLogger) Warnf(format string, v ...any) { s.logf(slog.LevelWarn, format, v) }

// Fatalf implements server.Logger. It does not exit.
func (s ServerLogger) Fatalf(format string, v ...any) {
	s.logf(slog.LevelError, "FATAL: "+format, v)
}

// Errorf implements server.Logger.
func (s ServerLogger) Errorf(format string, v ...any) { s.logf(slog.LevelError, format, v) }

// Debugf implements server.Logger.
func (s ServerLogger) Debugf(format string, v ...any) { s.logf(slog.LevelDebug, format, v) }

// Tracef implements server.Logger.
func (s ServerLogger) Tracef(format string, v ...any) { s.logf(slog.LevelDebug-4, format, v) }
