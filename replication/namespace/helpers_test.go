package namespace_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nomicore/nomicore/replication/ws"
)

// General helpers of this package's tests. What they share with the connection layer's
// tests — namespace ids, small configurations, frames on a test's end of a connection — is
// in replication/ws/wstest; waiting is internal/testkit's Eventually.

// TestMain checks for leaked goroutines, and has every connection check that no gate of the
// channels opens without waking its queue (ws.AuditParkedGates).
func TestMain(m *testing.M) {
	ws.AuditParkedGates(true)
	goleak.VerifyTestMain(m)
}

const (
	hubID  = "hub"
	peerID = "peer-a"
	wait   = 5 * time.Second // real-time bound on waiting for goroutines under test
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
