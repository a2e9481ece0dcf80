package cluster

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that every test leaves no goroutine of ours behind: a node's Close stops
// its followers, compactions, publisher, probe and connection. Three kinds of the NATS
// libraries' own are left out: the server's process-wide time service (started once, never
// stopped); a file store's state flusher, which ends a moment after its server; and the
// JetStream client's watcher of a publishing context's connection, which an object store
// write (a snapshot) starts for a context of its own and stops when the write ends — but
// when the write ends before that goroutine first ran (a loaded machine), the goroutine
// finds its channel already gone and waits forever (a race in the client: a small
// goroutine per such snapshot, nothing else).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}
