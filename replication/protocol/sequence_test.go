package protocol

import (
	"math"
	"testing"
)

// TestS3_SequenceFromOneStrictlyIncreasing: check 9 of docs/protocol.md#frame-checks, per
// direction, from 1.
func TestS3_SequenceFromOneStrictlyIncreasing(t *testing.T) {
	for _, bad := range [][]uint32{{0}, {2}, {1, 1}, {1, 3}, {1, 2, 2}, {1, 2, 1}} {
		var s SequenceChecker
		var err error
		for _, seq := range bad {
			if err = s.Check(seq); err != nil {
				break
			}
		}
		if codeOf(err) != CodeSequenceViolation {
			t.Errorf("sequence %v: %v, want SEQUENCE_VIOLATION", bad, err)
		}
	}
	var s SequenceChecker
	for seq := uint32(1); seq <= 1000; seq++ {
		if err := s.Check(seq); err != nil {
			t.Fatal(err)
		}
	}
	// No wrap: after 2^32-1 nothing is acceptable, 0 and 1 included.
	s = SequenceChecker{received: math.MaxUint32 - 1}
	if err := s.Check(math.MaxUint32); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint32{0, 1, math.MaxUint32} {
		if err := s.Check(seq); codeOf(err) != CodeSequenceViolation {
			t.Errorf("after 2^32-1, %d: %v", seq, err)
		}
	}
}

func TestS23_2_OutboundSequenceExhausted(t *testing.T) {
	a := SequenceAllocator{sent: math.MaxUint32 - 1}
	if seq, err := a.Next(); err != nil || seq != math.MaxUint32 {
		t.Fatalf("last sequence: %d %v", seq, err)
	}
	for range 2 {
		_, err := a.Next()
		e, ok := err.(*Error)
		if !ok || e.Code != CodeOutboundSequenceExhausted || e.Scope != ScopeConnection {
			t.Fatalf("exhausted: %#v", err)
		}
		if _, ok := e.Spec(); ok || e.CloseCode() != CloseInternal {
			t.Fatal("OUTBOUND_SEQUENCE_EXHAUSTED is internal: no registry row, close 1011")
		}
	}
	out := NewOutbound(chunkedCodec())
	out.seq.sent = math.MaxUint32
	if b, _, err := out.AppendFrame(nil, &UpdateAck{NamespaceID: nsA}); codeOf(err) != CodeOutboundSequenceExhausted || len(b) != 0 {
		t.Fatalf("Outbound after exhaustion: %v", err)
	}
}

// TestS3_InboundCheckOrder: the sequence is check 9, after the envelope and before the payload;
// a connection-scope failure breaks the direction, a namespace-scope one does not.
func TestS3_InboundCheckOrder(t *testing.T) {
	lim := testLimits()
	lim.MaxUpdateBytes = 4
	c := NewCodec(lim, 0)
	out := NewOutbound(NewCodec(testLimits(), 0))
	frame := func(m Message) []byte {
		b, _, err := out.AppendFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	f1 := frame(&UpdateAck{NamespaceID: nsA, AckedSequence: 1})
	f2 := frame(&Update{NamespaceID: nsB, Update: []byte{1, 2, 3, 4, 5}}) // over the receiver's cap
	f3 := frame(&UpdateAck{NamespaceID: nsA, AckedSequence: 2})

	in := NewInbound(c)
	if f, err := in.Decode(f1); err != nil || f.Sequence != 1 {
		t.Fatalf("frame 1: %v", err)
	}
	_, err := in.Decode(f2)
	if e, ok := err.(*Error); !ok || e.Code != CodeUpdateTooLarge || e.Scope != ScopeNamespace || e.Namespace != nsB || e.Sequence != 2 || !e.HasHeader {
		t.Fatalf("frame 2: %#v", err)
	}
	// The namespace failure consumed sequence 2; the connection goes on with 3.
	if f, err := in.Decode(f3); err != nil || f.Sequence != 3 {
		t.Fatalf("frame 3: %v", err)
	}

	// Sequence before payload: a replayed frame with a malformed payload is SEQUENCE_VIOLATION.
	bad := append([]byte(nil), f3...)
	bad = append(bad, 0)
	setPayloadLength(bad, uint32(len(bad)-HeaderLen))
	if _, err := in.Decode(bad); codeOf(err) != CodeSequenceViolation {
		t.Fatalf("replayed malformed frame: %v", err)
	}
	// The direction is now broken: even a correct next frame gets the same error.
	next := frame(&UpdateAck{NamespaceID: nsA, AckedSequence: 3})
	if _, err := in.Decode(next); codeOf(err) != CodeSequenceViolation {
		t.Fatalf("after a connection error: %v", err)
	}

	// Envelope before sequence: a bad magic with a wrong sequence is BAD_MAGIC.
	in = NewInbound(c)
	b := append([]byte(nil), f3...)
	b[0] = 'X'
	if _, err := in.Decode(b); codeOf(err) != CodeBadMagic {
		t.Fatalf("bad magic, wrong sequence: %v", err)
	}
	// Payload after sequence: the right sequence with a malformed payload is MALFORMED_FRAME.
	in = NewInbound(c)
	b = append([]byte(nil), f1...)
	b = append(b, 0)
	setPayloadLength(b, uint32(len(b)-HeaderLen))
	if _, err := in.Decode(b); codeOf(err) != CodeMalformedFrame {
		t.Fatalf("malformed payload: %v", err)
	}
}

// TestS6_CapabilitiesSwitchChunkFrames: 0x42 is refused until the handshake installs
// CAP_CHUNKED_UPDATE in both directions.
func TestS6_CapabilitiesSwitchChunkFrames(t *testing.T) {
	chunk := &UpdateChunk{Kind: KindLiveUpdate, NamespaceID: nsA, TransferID: 1, ChunkCount: 1, TotalBytes: 1, Bytes: []byte{1}}
	out := NewOutbound(NewCodec(testLimits(), 0))
	if _, _, err := out.AppendFrame(nil, chunk); codeOf(err) != CodeUnsupportedMessageType {
		t.Fatalf("before negotiation: %v", err)
	}
	out.SetCapabilities(CapChunkedUpdate)
	b, seq, err := out.AppendFrame(nil, chunk)
	if err != nil || seq != 1 {
		t.Fatalf("after negotiation: seq %d, %v (a refused frame must not use a sequence)", seq, err)
	}
	in := NewInbound(NewCodec(testLimits(), 0))
	in.SetCapabilities(CapChunkedUpdate)
	if _, err := in.Decode(b); err != nil {
		t.Fatal(err)
	}
	v1 := NewInbound(NewCodec(testLimits(), 0))
	if _, err := v1.Decode(b); codeOf(err) != CodeUnsupportedMessageType {
		t.Fatalf("v1 receiver: %v", err)
	}
}
