package namespace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
)

// General helpers of this package's tests, the same as the connection layer's tests use
// (replication/ws): identities, configurations, waiting, and frames on a test's end of a
// connection.

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

func nsN(i int) protocol.NamespaceID {
	const hexd = "0123456789abcdef"
	b := []byte("ns-00000000000000000000000000000000")
	for j := len(b) - 1; i > 0; j-- {
		b[j] = hexd[i%16]
		i /= 16
	}
	return protocol.MustNamespaceID(string(b))
}

// smallConfig has limits small enough to reach in tests.
func smallConfig(t testing.TB) protocol.Config {
	c := protocol.DefaultConfig()
	c.MaxUpdateBytes, c.MaxSyncDiffBytes, c.MaxBootstrapBytes = 1024, 1024, 1024
	c.ProtocolOverheadBytes = 1024
	c.MaxFrameBytes = 2048
	c.MaxQueuedUpdateBytes, c.MaxQueuedUpdateCount = 8192, 16
	c.MaxChunkedUpdateBytes, c.MaxChunkedBootstrapBytes, c.MaxChunkedSyncDiffBytes = 8192, 8192, 8192
	c.MaxQueuedControlBytes = 4096
	c.HighWaterBytes, c.LowWaterBytes = 4096, 1024
	c.MaxQueuedBytesPerConnection = 12288
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// eventually polls cond until it holds or the real-time bound passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// maxRand always draws the top of the range: every backoff delay equals its cap.
type maxRand struct{}

func (maxRand) Int64N(n int64) int64 { return n - 1 }

// messenger carries whole messages: a *wstest.End.
type messenger interface {
	Send(b []byte) error
	Recv(ctx context.Context) ([]byte, error)
}

// sendFrame encodes m with out, sends it on end and returns its sequence.
func sendFrame(t testing.TB, end messenger, out *protocol.Outbound, m protocol.Message) uint32 {
	t.Helper()
	b, seq, err := out.AppendFrame(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := end.Send(b); err != nil {
		t.Fatal(err)
	}
	return seq
}

// recvFrame receives the next message on end (waiting at most wait) and decodes it with in.
func recvFrame(t testing.TB, end messenger, in *protocol.Inbound) protocol.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	b, err := end.Recv(ctx)
	if err != nil {
		t.Fatalf("recv: %v", err)
	}
	f, err := in.Decode(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return f
}

// recvClose reads end until the other side closes and returns the close code and the
// connection ERROR code received last before it ("" if none).
func recvClose(t testing.TB, end messenger, in *protocol.Inbound) (protocol.CloseCode, protocol.ErrorCode) {
	t.Helper()
	var code protocol.ErrorCode
	for {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		b, err := end.Recv(ctx)
		cancel()
		if err != nil {
			var ce *ws.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("expected a close, got %v", err)
			}
			return ce.Code, code
		}
		if f, err := in.Decode(b); err == nil {
			if m, ok := f.Message.(*protocol.ErrorMessage); ok && m.Scope == protocol.ScopeConnection {
				code = m.Code
			}
		}
	}
}

func hello() *protocol.Hello {
	return &protocol.Hello{PeerInstanceID: peerID, ExpectedHubInstanceID: hubID, ProtocolVersions: []uint64{1},
		OptionalCapabilities: protocol.CapChunkedUpdate, ConnectionNonce: [16]byte{1, 2, 3}}
}
