package protocol

import (
	"bytes"
	"encoding/binary"
	"math"
	"runtime"
	"testing"

	"github.com/nomicore/nomicore/lib0"
)

// frameWith builds a frame around a raw payload, with payloadLength set to match.
func frameWith(t MessageType, seq uint32, payload []byte) []byte {
	b := appendHeader(nil, t, seq)
	b = append(b, payload...)
	setPayloadLength(b, uint32(len(payload)))
	return b
}

// TestS3_EnvelopeCheckOrder: each envelope fault alone gives its code, and when two faults
// meet, the earlier check of docs/protocol.md#frame-checks wins.
func TestS3_EnvelopeCheckOrder(t *testing.T) {
	good := encode(t, 1, &UpdateAck{NamespaceID: nsA, AckedSequence: 1})
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	magic := func(b []byte) []byte { b[0] = 'X'; return b }
	version := func(b []byte) []byte { b[4] = 2; return b }
	flags := func(b []byte) []byte { b[7] = 1; return b }
	reserved := func(b []byte) []byte { b[19] = 1; return b }
	unknown := func(b []byte) []byte { b[5] = 0x50; return b }
	chunk := func(b []byte) []byte { b[5] = byte(TypeUpdateChunk); return b }
	long := func(b []byte) []byte { binary.BigEndian.PutUint32(b[12:16], 1000); return b }
	huge := func(b []byte) []byte { binary.BigEndian.PutUint32(b[12:16], math.MaxUint32); return b }
	cases := []struct {
		name string
		msg  []byte
		max  int
		want ErrorCode
	}{
		{"too large beats short", []byte("NMC"), 2, CodeFrameTooLarge},
		{"short", good[:19], 0, CodeMalformedFrame},
		{"magic", mut(magic), 0, CodeBadMagic},
		{"magic beats version", mut(func(b []byte) []byte { return version(magic(b)) }), 0, CodeBadMagic},
		{"version", mut(version), 0, CodeUnsupportedEnvelopeVersion},
		{"version beats flags", mut(func(b []byte) []byte { return flags(version(b)) }), 0, CodeUnsupportedEnvelopeVersion},
		{"flags", mut(flags), 0, CodeUnsupportedFlags},
		{"flags beat reserved", mut(func(b []byte) []byte { return reserved(flags(b)) }), 0, CodeUnsupportedFlags},
		{"reserved", mut(reserved), 0, CodeMalformedFrame},
		{"reserved beats type", mut(func(b []byte) []byte { return unknown(reserved(b)) }), 0, CodeMalformedFrame},
		{"unknown type", mut(unknown), 0, CodeUnsupportedMessageType},
		{"0x42 without capability", mut(chunk), 0, CodeUnsupportedMessageType},
		{"type beats length", mut(func(b []byte) []byte { return long(unknown(b)) }), 0, CodeUnsupportedMessageType},
		{"declared length", mut(long), 0, CodeFrameLengthMismatch},
		{"declared length over max", mut(huge), 0, CodeFrameTooLarge},
		{"declared length over max, huge limit", mut(huge), math.MaxInt, CodeFrameLengthMismatch},
	}
	for _, c := range cases {
		lim := testLimits()
		if c.max != 0 {
			lim.MaxFrameBytes = c.max
		}
		if _, err := NewCodec(lim, 0).Decode(c.msg); codeOf(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
}

// TestS3_NoAllocationFromDeclaredLengths: a huge declared length on a short body, at the
// envelope and inside the payload, is refused without allocating from it
// (docs/protocol.md#envelope: "Decoder 在复制 或分配 payload 前检查…"). The bound (4 KiB per decode) is
// far below any of the declared sizes (≥ 1 MB).
func TestS3_NoAllocationFromDeclaredLengths(t *testing.T) {
	ns := nsA.appendTo(nil)
	bigLen := lib0.AppendVarUint(nil, math.MaxUint32)
	cases := []struct {
		name string
		msg  []byte
		lim  Limits
		want ErrorCode
	}{
		{"envelope payloadLength 2^32-1", func() []byte {
			b := encode(t, 1, &UpdateAck{NamespaceID: nsA})
			binary.BigEndian.PutUint32(b[12:16], math.MaxUint32)
			return b
		}(), testLimits(), CodeFrameTooLarge},
		{"envelope payloadLength under a huge limit", func() []byte {
			b := encode(t, 1, &UpdateAck{NamespaceID: nsA})
			binary.BigEndian.PutUint32(b[12:16], math.MaxUint32)
			return b
		}(), Limits{MaxFrameBytes: math.MaxInt}, CodeFrameLengthMismatch},
		{"stateVector length 2^32-1", frameWith(TypeSyncStep1, 1, append(append(append(ns, 1), bigLen...), 1, 2, 3)),
			Limits{MaxFrameBytes: math.MaxInt}, CodeMalformedFrame},
		{"update length 2^32-1", frameWith(TypeUpdate, 1, append(append(ns, bigLen...), 1)),
			Limits{MaxFrameBytes: math.MaxInt, MaxUpdateBytes: math.MaxInt}, CodeMalformedFrame},
		{"protocolVersions count 10^9", frameWith(TypeHello, 1, append([]byte{1, 'p', 1, 'h'}, lib0.AppendVarUint(nil, 1e9)...)),
			Limits{MaxFrameBytes: math.MaxInt}, CodeMalformedFrame},
		{"safeMessage length 2^32-1", frameWith(TypeError, 1, append([]byte{0, 1, 'X', 0, 0, 0, 0}, bigLen...)),
			Limits{MaxFrameBytes: math.MaxInt}, CodeMalformedFrame},
	}
	for _, c := range cases {
		codec := NewCodec(c.lim, CapChunkedUpdate)
		if _, err := codec.Decode(c.msg); codeOf(err) != c.want {
			t.Fatalf("%s: %v, want %s", c.name, err, c.want)
		}
		const runs = 200
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			codec.Decode(c.msg)
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 4<<10 {
			t.Errorf("%s: %d bytes allocated per decode", c.name, per)
		}
	}
}

// TestS10_1_DecodeUpdateAllocatesOnce: an UPDATE decodes with one allocation (the message)
// and its bytes alias the input.
func TestS10_1_DecodeUpdateAllocatesOnce(t *testing.T) {
	wire := encode(t, 1, &Update{NamespaceID: nsA, Update: bytes.Repeat([]byte{7}, 1024)})
	c := chunkedCodec()
	if n := testing.AllocsPerRun(100, func() {
		if _, err := c.Decode(wire); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Fatalf("%.1f allocations per UPDATE decode, want at most 1", n)
	}
	in := NewInbound(c)
	if n := testing.AllocsPerRun(100, func() {
		in.seq = SequenceChecker{} // replay sequence 1
		if _, err := in.Decode(wire); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Fatalf("%.1f allocations per Inbound UPDATE decode, want at most 1", n)
	}
	f, _ := c.Decode(wire)
	u := f.Message.(*Update).Update
	if &u[0] != &wire[len(wire)-1024] {
		t.Fatal("decoded update bytes do not alias the input")
	}
}

// TestS4_PayloadGrammar: structural faults of docs/protocol.md#payload-encoding inside
// otherwise valid frames.
func TestS4_PayloadGrammar(t *testing.T) {
	ns := nsA.appendTo(nil)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name string
		t    MessageType
		p    []byte
	}{
		{"non-canonical ackedSequence", TypeUpdateAck, cat(ns, []byte{0x81, 0x00})},
		{"non-canonical namespace length", TypeUpdateAck, cat([]byte{0xa3, 0x00}, ns[1:], []byte{1})},
		{"ackedSequence over uint32", TypeUpdateAck, cat(ns, lib0.AppendVarUint(nil, 1<<32))},
		{"drainTimeoutMs over 2^53-1", TypeGoAway, cat([]byte{1, 'R'}, lib0.AppendVarUint(nil, 1<<53), []byte{0})},
		{"invalid UTF-8 reasonCode", TypeCloseNamespace, cat(ns, []byte{2, 0xc3, 0x28})},
		{"namespace id with uppercase", TypeUpdateAck, cat([]byte{35}, []byte("ns-0123456789ABCDEF0123456789abcdef"), []byte{1})},
		{"optional marker 2", TypeGoAway, cat([]byte{1, 'R', 1, 2, 5})},
		{"bool 2", TypeOpenNamespace, cat(ns, []byte{2, 0, 0})},
		{"trailing byte", TypeUpdateAck, cat(ns, []byte{1, 0})},
		{"protocolVersions count 17", TypeHello, cat([]byte{1, 'p', 1, 'h', 17}, bytes.Repeat([]byte{1}, 17), make([]byte, 8), []byte{16}, make([]byte, 16))},
		{"instance id with underscore", TypeHello, cat([]byte{3, 'p', '_', 'a', 1, 'h', 1, 1}, make([]byte, 8), []byte{16}, make([]byte, 16))},
		{"hello nonce of 15 bytes", TypeHello, cat([]byte{1, 'p', 1, 'h', 1, 1}, make([]byte, 8), []byte{15}, make([]byte, 15))},
		{"chunk kind 3", TypeUpdateChunk, cat([]byte{3}, ns, []byte{1, 0, 1, 1, 1, 9})},
		{"chunk kind over 2^53", TypeUpdateChunk, cat(lib0.AppendVarUint(nil, 1<<53), ns, []byte{1, 0, 1, 1, 1, 9})},
	}
	for _, c := range cases {
		if _, err := chunkedCodec().Decode(frameWith(c.t, 1, c.p)); codeOf(err) != CodeMalformedFrame {
			t.Errorf("%s: %v, want MALFORMED_FRAME", c.name, err)
		}
	}
}

// TestS10_3_ChunkSingleFrameRules: the codec-level rules of docs/protocol.md#chunked-transfers
// refuse both directions.
func TestS10_3_ChunkSingleFrameRules(t *testing.T) {
	base := UpdateChunk{Kind: KindSnapshot, NamespaceID: nsA, TransferID: 1, ChunkIndex: 0, ChunkCount: 2, TotalBytes: 4,
		ReplicationID: replID, ReplicationEpoch: 1, Bytes: []byte{1, 2}}
	cases := []struct {
		name string
		mut  func(c *UpdateChunk)
		want ErrorCode
		// structOnly: a Go value the wire cannot express (a binding field where the grammar
		// has none); the wire form of those faults is in the golden bad vectors.
		structOnly bool
	}{
		{"kind 3", func(c *UpdateChunk) { c.Kind = 3 }, CodeMalformedFrame, false},
		{"transferId 0", func(c *UpdateChunk) { c.TransferID = 0 }, CodeMalformedFrame, false},
		{"chunkCount 0", func(c *UpdateChunk) { c.ChunkCount = 0 }, CodeMalformedFrame, false},
		{"chunkIndex = chunkCount", func(c *UpdateChunk) { c.ChunkIndex = 2; c.ReplicationID, c.ReplicationEpoch = "", 0 }, CodeMalformedFrame, false},
		{"empty bytes", func(c *UpdateChunk) { c.Bytes = nil }, CodeMalformedFrame, false},
		{"bytes over totalBytes", func(c *UpdateChunk) { c.TotalBytes = 1 }, CodeMalformedFrame, false},
		{"snapshot binding epoch 0", func(c *UpdateChunk) { c.ReplicationEpoch = 0 }, CodeMalformedFrame, false},
		{"snapshot binding bad id", func(c *UpdateChunk) { c.ReplicationID = "xyz" }, CodeMalformedFrame, false},
		{"snapshot with syncRoundId", func(c *UpdateChunk) { c.SyncRoundID = 1 }, CodeMalformedFrame, true},
		{"binding on a follow-up", func(c *UpdateChunk) { c.ChunkIndex = 1 }, CodeMalformedFrame, true},
		{"live update with binding", func(c *UpdateChunk) { c.Kind = KindLiveUpdate }, CodeMalformedFrame, true},
		{"sync diff with identity", func(c *UpdateChunk) { c.Kind = KindSyncDiff }, CodeMalformedFrame, true},
		{"no namespace", func(c *UpdateChunk) { c.NamespaceID = NamespaceID{} }, CodeMalformedFrame, false},
		{"over maxUpdateBytes", func(c *UpdateChunk) {
			c.Bytes = make([]byte, 512<<10+1)
			c.TotalBytes = 1 << 20
		}, CodeUpdateTooLarge, false},
	}
	for _, k := range cases {
		c := base
		k.mut(&c)
		_, err := chunkedCodec().AppendFrame(nil, 1, &c)
		if codeOf(err) != k.want {
			t.Errorf("%s: %v, want %s", k.name, err, k.want)
		}
	}
	// And the decoder refuses the same frames: encode with the rule check bypassed.
	for _, k := range cases[:len(cases)-1] {
		if k.structOnly {
			continue
		}
		c := base
		k.mut(&c)
		raw := frameWith(TypeUpdateChunk, 1, appendPayload(nil, &c))
		if _, err := chunkedCodec().Decode(raw); codeOf(err) != CodeMalformedFrame {
			t.Errorf("decode %s: %v", k.name, err)
		}
	}
	// The namespace-scope cap names the namespace.
	c := base
	c.Bytes, c.TotalBytes = make([]byte, 600<<10), 1<<20
	raw := frameWith(TypeUpdateChunk, 9, appendPayload(nil, &c))
	lim := testLimits()
	lim.MaxFrameBytes = 1 << 21
	_, err := NewCodec(lim, CapChunkedUpdate).Decode(raw)
	if e, ok := err.(*Error); !ok || e.Code != CodeUpdateTooLarge || e.Scope != ScopeNamespace || e.Namespace != nsA || e.Sequence != 9 {
		t.Fatalf("oversize chunk: %#v", err)
	}
}

// TestS3_EncoderLimits: the encoder refuses what the receiver would refuse.
func TestS3_EncoderLimits(t *testing.T) {
	c := chunkedCodec()
	big := make([]byte, 512<<10+1)
	for _, k := range []struct {
		m    Message
		want ErrorCode
	}{
		{&Update{NamespaceID: nsA, Update: big}, CodeUpdateTooLarge},
		{&SyncStep2{NamespaceID: nsA, Update: big}, CodeSyncDiffTooLarge},
		{&BootstrapSnapshot{NamespaceID: nsA, ReplicationID: replID, ReplicationEpoch: 1, Snapshot: big}, CodeBootstrapTooLarge},
		{&SyncStep1{NamespaceID: nsA, StateVector: make([]byte, 600<<10)}, CodeFrameTooLarge},
		{&Update{Update: []byte{1}}, CodeMalformedFrame},
	} {
		dst := []byte("keep")
		out, err := c.AppendFrame(dst, 1, k.m)
		if codeOf(err) != k.want || string(out) != "keep" {
			t.Errorf("%v: %v (appended %d bytes), want %s", k.m.Type(), err, len(out)-4, k.want)
		}
	}
	if _, err := NewCodec(testLimits(), 0).AppendFrame(nil, 1, &UpdateChunk{Kind: 0, NamespaceID: nsA, TransferID: 1, ChunkCount: 1, TotalBytes: 1, Bytes: []byte{1}}); codeOf(err) != CodeUnsupportedMessageType {
		t.Errorf("UPDATE_CHUNK encoded without the capability: %v", err)
	}
	// A frame exactly at maxFrameBytes passes; one byte more fails.
	lim := testLimits()
	m := &SyncStep1{NamespaceID: nsA, StateVector: make([]byte, 1000)}
	n := len(encode(t, 1, m))
	lim.MaxFrameBytes = n
	if _, err := NewCodec(lim, 0).AppendFrame(nil, 1, m); err != nil {
		t.Errorf("frame of exactly maxFrameBytes: %v", err)
	}
	lim.MaxFrameBytes = n - 1
	if _, err := NewCodec(lim, 0).AppendFrame(nil, 1, m); codeOf(err) != CodeFrameTooLarge {
		t.Errorf("frame one over maxFrameBytes: %v", err)
	}
}
