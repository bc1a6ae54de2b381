package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvselect/kvselect/bus/natstest"
	"github.com/kvselect/kvselect/internal/poll"
)

// The AIBrix handler over two replicated tables is tested in http/aibrix/aibrixcore (the one
// adapter from this package to the handler); this file measures the table's propagation.

// BenchmarkAIBrixSessionPropagation measures one AIBrix binding's trip between two replicas
// over loopback NATS: a Bind on a that moves the session, until b's table returns the new
// target. ns/op is the propagation latency (encode, bus queues, NATS, decode, Apply) plus up
// to one 20 µs polling interval and its timer slack; b is polled, not hooked, because the
// table has no apply hook. A busy-polling loop starves the bus goroutines on a 2-core host.
func BenchmarkAIBrixSessionPropagation(b *testing.B) {
	srv := natstest.RunServer(b)
	ra := startReplica(b, srv.ClientURL(), "a", "b")
	rb := startReplica(b, srv.ClientURL(), "b", "a")
	sa := ra.svc.EnableAIBrixSessions(AIBrixSessionConfig{})
	sb := rb.svc.EnableAIBrixSessions(AIBrixSessionConfig{})
	key := AIBrixSessionKey{Model: "llama", Session: "bench"}
	targets := []AIBrixTarget{podX, podY}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		want := targets[i%2]
		sa.Bind(key, want, time.Minute, time.Now())
		err := poll.Poll(syncTimeout, 20*time.Microsecond, func() error {
			if got, ok := sb.Get(key, time.Now()); !ok || got != want {
				return fmt.Errorf("binding %d did not reach b", i)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		i++
	}
}
