package wstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
)

// Messenger carries whole messages: an *End, or a test's end of a real WebSocket.
type Messenger interface {
	Send(b []byte) error
	Recv(ctx context.Context) ([]byte, error)
}

// RecvTimeout is how long RecvFrame and RecvClose wait for each message, in real time.
const RecvTimeout = 5 * time.Second

// SendFrame encodes m with out, sends it on end and returns its sequence.
func SendFrame(t testing.TB, end Messenger, out *protocol.Outbound, m protocol.Message) uint32 {
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

// RecvFrame receives the next message on end (waiting at most RecvTimeout) and decodes it
// with in.
func RecvFrame(t testing.TB, end Messenger, in *protocol.Inbound) protocol.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), RecvTimeout)
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

// RecvClose reads end until the other side closes and returns the close code and the
// connection ERROR code received last before it ("" if none).
func RecvClose(t testing.TB, end Messenger, in *protocol.Inbound) (protocol.CloseCode, protocol.ErrorCode) {
	t.Helper()
	var code protocol.ErrorCode
	for {
		ctx, cancel := context.WithTimeout(context.Background(), RecvTimeout)
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

// Hello is the HELLO of a test peer: protocol version 1, chunked transfers offered, a fixed
// nonce.
func Hello(peer, hub string) *protocol.Hello {
	return &protocol.Hello{PeerInstanceID: peer, ExpectedHubInstanceID: hub, ProtocolVersions: []uint64{1},
		OptionalCapabilities: protocol.CapChunkedUpdate, ConnectionNonce: [16]byte{1, 2, 3}}
}

// NamespaceID returns the namespace id whose 32 hex digits are i: NamespaceID(1) is
// ns-00000000000000000000000000000001.
func NamespaceID(i int) protocol.NamespaceID {
	const hexd = "0123456789abcdef"
	b := []byte("ns-00000000000000000000000000000000")
	for j := len(b) - 1; i > 0; j-- {
		b[j] = hexd[i%16]
		i /= 16
	}
	return protocol.MustNamespaceID(string(b))
}

// SmallConfig is a valid configuration whose limits are small enough for tests to reach:
// 1 KiB updates, diffs and snapshots, 2 KiB frames, 8 KiB chunked transfers and queues.
func SmallConfig(t testing.TB) protocol.Config {
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

// MaxRand is a random source that always draws the top of the range: every backoff delay
// equals its cap.
type MaxRand struct{}

// Int64N returns n − 1.
func (MaxRand) Int64N(n int64) int64 { return n - 1 }
