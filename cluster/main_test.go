package cluster

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every test leaves no goroutine of ours behind: a node's Close stops
// its followers, compactions, publisher, probe and connection. Two kinds of the NATS
// server's own are left out: its process-wide time service (started once, never stopped)
// and a file store's state flusher, which ends a moment after its server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"))
}
