package namespace_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/replication/ws/wstest"
)

// FuzzHubNamespaces drives the hub's namespace layer (a real registry behind it) with
// arbitrary sequences of well-formed namespace frames: opens with and without identities,
// snapshot acknowledgements, sync frames with arbitrary rounds and related sequences,
// updates (valid Yjs, meta writes, garbage), chunks of every kind (first or follow-up,
// consistent or not), acknowledgements, resyncs, errors and closes, on a namespace that exists
// and one that does not. Whatever arrives, the layer never
// panics or blocks, every namespace ERROR it sends has a docs/protocol.md#namespace-errors
// code, the connection closes only with a docs/protocol.md#close-codes code after a
// docs/protocol.md#connection-errors ERROR, and the hub shuts down with nothing left running
// (goleak).
func FuzzHubNamespaces(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0x10, 0x02, 0x03, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c})
	f.Add([]byte{0x00, 0x01, 0x03, 0x34, 0x05, 0x16, 0x27, 0x38, 0x0b, 0x1b})
	f.Add([]byte{0x11, 0x00, 0x00, 0x0a, 0x09, 0x02})
	f.Add([]byte{0x00, 0x02, 0x03, 0x80, 0x01, 0xa0, 0x01, 0xc0, 0x02, 0x80, 0x06})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 64 {
			in = in[:64]
		}
		h := newNSHub(t, chunkConfig(t), persistence.Options{})
		ns, id := h.create()
		missing := wstest.NamespaceID(0xf00d)
		w := h.dial(peerID)
		doc := newYDoc(t, 200)
		pick := func(b byte) protocol.NamespaceID {
			if b&0x10 != 0 {
				return missing
			}
			return ns
		}
		var last uint32 // the last sequence the hub sent, as far as we read
		next := func(i int) byte {
			if i < len(in) {
				return in[i]
			}
			return 0
		}
		for i := 0; i < len(in); i++ {
			b := in[i]
			target := pick(b)
			arg := next(i + 1)
			var m protocol.Message
			if b&0x80 != 0 {
				// A chunk: kind arg%3, index (b>>5)&3 of 1+arg%4, transfer 1+arg%3, bound to
				// the identity or to round arg%4.
				k := protocol.ChunkKind(arg % 3)
				c := &protocol.UpdateChunk{Kind: k, NamespaceID: target, TransferID: 1 + uint32(arg%3),
					ChunkIndex: uint32(b>>5) & 3, ChunkCount: 1 + uint32(arg%4), TotalBytes: 700 * (1 + uint32(arg%4)),
					Bytes: doc.diff(nil)}
				if c.ChunkIndex == 0 && k == protocol.KindSnapshot {
					c.ReplicationID, c.ReplicationEpoch = id.ReplicationID, id.Epoch
				}
				if c.ChunkIndex == 0 && k == protocol.KindSyncDiff {
					c.SyncRoundID = uint32(arg % 4)
				}
				m = c
			}
			if m == nil {
				m = fuzzFrame(b, arg, target, id, last, doc)
			}
			if m == nil {
				must(t, writeLocal(t, h.reg, ns, newYDoc(t, 100).set("hub", float64(arg))))
				continue
			}
			b2, _, err := w.out.AppendFrame(nil, m)
			if err != nil {
				continue // a message the codec refuses to encode (the sequence was not used)
			}
			if w.end.Send(b2) != nil {
				break
			}
			// Read what the hub sent so far.
			for _, fr := range drain(w) {
				last = fr.Sequence
				if e, ok := fr.Message.(*protocol.ErrorMessage); ok && e.Scope == protocol.ScopeNamespace {
					if _, known := protocol.LookupError(protocol.ScopeNamespace, e.Code); !known {
						t.Fatalf("unregistered namespace ERROR %q", e.Code)
					}
				}
			}
		}
	})
}

// fuzzFrame is the non-chunk frame FuzzHubNamespaces sends for b (nil: a local write on the
// hub instead).
func fuzzFrame(b, arg byte, target protocol.NamespaceID, id registry.Identity, last uint32, doc *ydoc) protocol.Message {
	switch b & 0x0f {
	case 0:
		return &protocol.OpenNamespace{NamespaceID: target}
	case 1:
		return &protocol.OpenNamespace{NamespaceID: target, HasLocalReplica: true, ReplicationID: id.ReplicationID, ReplicationEpoch: 1 + uint64(arg%2)}
	case 2:
		return &protocol.BootstrapAck{NamespaceID: target, AckedSequence: last}
	case 3:
		return &protocol.SyncStep1{NamespaceID: target, SyncRoundID: uint32(arg % 4), StateVector: doc.sv()}
	case 4:
		return &protocol.SyncStep2{NamespaceID: target, SyncRoundID: uint32(arg % 4), RelatedStep1Sequence: last - uint32(arg%3), Update: doc.diff(nil)}
	case 5:
		return &protocol.SyncApplied{NamespaceID: target, SyncRoundID: uint32(arg % 4), AckedSequence: last - uint32(arg%3)}
	case 6:
		return &protocol.Update{NamespaceID: target, Update: doc.set("k", float64(arg))}
	case 7:
		return &protocol.Update{NamespaceID: target, Update: doc.setMeta("k", float64(arg))}
	case 8:
		return &protocol.Update{NamespaceID: target, Update: []byte{arg, arg, arg}}
	case 9:
		return &protocol.UpdateAck{NamespaceID: target, AckedSequence: last}
	case 10:
		return &protocol.ResyncRequired{NamespaceID: target, ReasonCode: protocol.ResyncSendQueueOverflow}
	case 11:
		return &protocol.CloseNamespace{NamespaceID: target, ReasonCode: "remove"}
	case 12:
		return &protocol.CloseOK{NamespaceID: target, AckedSequence: last}
	case 13:
		e, _ := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeAckTimeout, target, "x")
		return e
	case 14:
		e, _ := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeApplyFailed, target, "x")
		return e
	default:
		return nil
	}
}

// drain reads what the hub has sent until a barrier, or nothing once the connection closed
// (checking its close code and connection ERROR).
func drain(w *wire) []protocol.Frame {
	w.barriers++
	barrier := wstest.NamespaceID(0xbabe0000 + w.barriers)
	b, _, err := w.out.AppendFrame(nil, &protocol.ResyncRequired{NamespaceID: barrier, ReasonCode: "x"})
	if err != nil {
		return nil
	}
	if w.end.Send(b) != nil {
		return nil
	}
	var out []protocol.Frame
	for {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		msg, err := w.end.Recv(ctx)
		cancel()
		if err != nil {
			var ce *ws.CloseError
			if errors.As(err, &ce) {
				switch ce.Code {
				case protocol.CloseNormal, protocol.CloseGoingAway, protocol.CloseProtocolError, protocol.ClosePolicy,
					protocol.CloseTooBig, protocol.CloseInternal:
				default:
					w.t.Fatalf("close code %d", ce.Code)
				}
				return out
			}
			w.t.Fatalf("recv: %v", err)
		}
		fr, err := w.in.Decode(msg)
		if err != nil {
			w.t.Fatalf("decode: %v", err)
		}
		if e, ok := fr.Message.(*protocol.ErrorMessage); ok {
			if e.NamespaceID == barrier {
				return out
			}
			if e.Scope == protocol.ScopeConnection {
				if _, known := protocol.LookupError(protocol.ScopeConnection, e.Code); !known {
					w.t.Fatalf("unregistered connection ERROR %q", e.Code)
				}
			}
		}
		out = append(out, fr)
	}
}
