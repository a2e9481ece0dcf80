package ws_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// FuzzHubConnection feeds arbitrary messages to a ready hub connection (after a valid
// HELLO): whatever arrives, the connection never panics, and when it closes it closes with a
// docs/protocol.md#close-codes close code, after an ERROR of the
// docs/protocol.md#connection-errors registry if it sent one. The input is a list of messages,
// each prefixed by a 2-byte big-endian length.
func FuzzHubConnection(f *testing.F) {
	cfg := protocol.DefaultConfig()
	codec := protocol.NewCodec(cfg.Limits(), protocol.CapChunkedUpdate)
	add := func(msgs ...protocol.Message) {
		var in []byte
		for i, m := range msgs {
			b, err := codec.AppendFrame(nil, uint32(i+2), m)
			if err != nil {
				f.Fatal(err)
			}
			in = binary.BigEndian.AppendUint16(in, uint16(len(b)))
			in = append(in, b...)
		}
		f.Add(in)
	}
	add(&protocol.OpenNamespace{NamespaceID: ns1})
	add(&protocol.OpenNamespace{NamespaceID: ns1}, &protocol.Update{NamespaceID: ns1, Update: []byte{1, 2}}, &protocol.UpdateAck{NamespaceID: ns1, AckedSequence: 2})
	add(&protocol.UpdateChunk{Kind: protocol.KindSyncDiff, NamespaceID: ns2, TransferID: 1, ChunkCount: 2, TotalBytes: 3, SyncRoundID: 1, Bytes: []byte{1}})
	add(&protocol.GoAway{ReasonCode: "SERVER_RESTARTING", DrainTimeoutMs: 1}, &protocol.CloseNamespace{NamespaceID: ns1, ReasonCode: "x"})
	add(wstest.Hello(peerID, hubID))
	f.Add([]byte{0, 3, 'N', 'M', 'C'})
	f.Fuzz(func(t *testing.T, in []byte) {
		fx := newHubFixture(t, protocol.DefaultConfig(), func(h *testHandler) { h.autoOpen, h.autoAck = true, true })
		p := fx.connect(1024)
		fx.handshake(p)
		for len(in) >= 2 {
			n := int(binary.BigEndian.Uint16(in))
			in = in[2:]
			if n > len(in) {
				n = len(in)
			}
			if err := p.end.Send(in[:n]); err != nil {
				break // the hub closed
			}
			in = in[n:]
		}
		// Drain what the hub answered, then close our end; the connection must finish.
		_ = p.end.Close(protocol.CloseNormal, "")
		for {
			b, err := p.end.Recv(context.Background())
			if err != nil {
				var ce *ws.CloseError
				if errors.As(err, &ce) {
					switch ce.Code {
					case protocol.CloseNormal, protocol.CloseGoingAway, protocol.CloseProtocolError,
						protocol.ClosePolicy, protocol.CloseTooBig, protocol.CloseInternal:
					default:
						t.Fatalf("close code %d", ce.Code)
					}
				}
				break
			}
			if fr, err := p.in.Decode(b); err == nil {
				if m, ok := fr.Message.(*protocol.ErrorMessage); ok && m.Scope == protocol.ScopeConnection {
					if _, ok := protocol.LookupError(protocol.ScopeConnection, m.Code); !ok {
						t.Fatalf("unregistered connection ERROR %q", m.Code)
					}
				}
			}
		}
	})
}
