package protocol

import (
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestS5_RoundTripEveryMessage: encode then decode gives the same fields, and re-encoding
// gives the same bytes (docs/protocol.md#conformance "encode/decode canonical roundtrip").
func TestS5_RoundTripEveryMessage(t *testing.T) {
	seen := map[MessageType]bool{}
	for i, s := range samples() {
		t.Run(s.name, func(t *testing.T) {
			seq := uint32(i + 1)
			b := encode(t, seq, s.msg)
			f, err := NewCodec(testLimits(), KnownCapabilities).Decode(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if f.Sequence != seq || f.Type() != s.msg.Type() {
				t.Fatalf("got %v #%d, want %v #%d", f.Type(), f.Sequence, s.msg.Type(), seq)
			}
			if !reflect.DeepEqual(f.Message, s.msg) {
				t.Fatalf("decoded\n %#v\nwant\n %#v", f.Message, s.msg)
			}
			again := encode(t, seq, f.Message)
			if string(again) != string(b) {
				t.Fatalf("re-encoded %x\nwant       %x", again, b)
			}
			seen[s.msg.Type()] = true
		})
	}
	if len(seen) != 19 {
		t.Fatalf("samples cover %d message types, want all 19 (the contract's 18 and PRESENCE)", len(seen))
	}
}

// Hand-assembled frames, written from the contract's tables (docs/protocol.md#envelope,
// docs/protocol.md#payload-encoding, and the message sections from docs/protocol.md#handshake
// to docs/protocol.md#errors) byte by byte, independent of the encoder.
func TestS3_HandAssembledFrames(t *testing.T) {
	const ns = "6e732d3031323334353637383961626364656630313233343536373839616263646566" // "ns-0123…cdef"
	cases := []struct {
		name string
		msg  Message
		seq  uint32
		hex  string
	}{
		{"UPDATE_ACK", &UpdateAck{NamespaceID: nsA, AckedSequence: 5}, 7,
			"4e4d4352" + "01" + "41" + "0000" + "00000007" + "00000025" + "00000000" + "23" + ns + "05"},
		{"HELLO", &Hello{PeerInstanceID: "p", ExpectedHubInstanceID: "hub", ProtocolVersions: []uint64{300, 1}, OptionalCapabilities: CapChunkedUpdate, ConnectionNonce: nonce}, 1,
			"4e4d4352" + "01" + "01" + "0000" + "00000001" + "00000023" + "00000000" +
				"0170" + "03687562" + "02" + "ac02" + "01" + "00000000" + "00000001" + "10" + "000102030405060708090a0b0c0d0e0f"},
		{"ERROR namespace", &ErrorMessage{Scope: ScopeNamespace, Code: CodeUpdateTooLarge, Fatal: true, Retryable: true, RelatedSequence: 128, HasRelatedSequence: true, NamespaceID: nsA, SafeMessage: "big"}, 2,
			"4e4d4352" + "01" + "04" + "0000" + "00000002" + "00000040" + "00000000" +
				"01" + "10" + hex.EncodeToString([]byte("UPDATE_TOO_LARGE")) + "01" + "01" + "01" + "8001" + "01" + "23" + ns + "03626967"},
		{"GOAWAY no retry", &GoAway{ReasonCode: "R", DrainTimeoutMs: 1}, 3,
			"4e4d4352" + "01" + "03" + "0000" + "00000003" + "00000004" + "00000000" + "0152" + "01" + "00"},
		{"OPEN_NAMESPACE bootstrap", &OpenNamespace{NamespaceID: nsA}, 4,
			"4e4d4352" + "01" + "10" + "0000" + "00000004" + "00000027" + "00000000" + "23" + ns + "00" + "00" + "00"},
		{"UPDATE_CHUNK sync first", &UpdateChunk{Kind: KindSyncDiff, NamespaceID: nsA, TransferID: 1, ChunkIndex: 0, ChunkCount: 2, TotalBytes: 3, SyncRoundID: 9, Bytes: []byte{0xaa}}, 5,
			"4e4d4352" + "01" + "42" + "0000" + "00000005" + "0000002c" + "00000000" + "02" + "23" + ns + "01" + "00" + "02" + "03" + "09" + "01aa"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := encode(t, c.seq, c.msg)
			if hex.EncodeToString(got) != c.hex {
				t.Fatalf("encoded %x\nwant    %s", got, c.hex)
			}
			want, _ := hex.DecodeString(c.hex)
			f, err := chunkedCodec().Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.Message, c.msg) || f.Sequence != c.seq {
				t.Fatalf("decoded %#v", f)
			}
		})
	}
}

// TestS13_ErrorRegistryFixesScopeFatalRetryable: NewErrorMessage takes the values from the
// registry, and the encoder refuses a registered code whose values differ
// (docs/protocol.md#errors: "调用方不能 覆盖").
func TestS13_ErrorRegistryFixesScopeFatalRetryable(t *testing.T) {
	for _, spec := range append(ConnectionErrors(), NamespaceErrors()...) {
		var ns NamespaceID
		if spec.Scope == ScopeNamespace {
			ns = nsA
		}
		m, err := NewErrorMessage(spec.Scope, spec.Code, ns, "safe")
		if err != nil {
			t.Fatalf("%s: %v", spec.Code, err)
		}
		if m.Fatal != spec.Fatal || m.Retryable != (spec.Retry != RetryNo) {
			t.Fatalf("%s: fatal %v retryable %v from registry %+v", spec.Code, m.Fatal, m.Retryable, spec)
		}
		b := encode(t, 1, m)
		// Flip fatal, then retryable: both must be refused on encode and on decode.
		for _, flip := range []func(*ErrorMessage){
			func(e *ErrorMessage) { e.Fatal = !e.Fatal },
			func(e *ErrorMessage) { e.Retryable = !e.Retryable },
		} {
			bad := *m
			flip(&bad)
			if _, err := chunkedCodec().AppendFrame(nil, 1, &bad); codeOf(err) != CodeMalformedFrame {
				t.Fatalf("%s with overridden registry values encoded: %v", spec.Code, err)
			}
		}
		// Decode side: patch the fatal byte in place.
		fatalAt := HeaderLen + 1 + 1 + len(spec.Code)
		b[fatalAt] ^= 1
		if _, err := chunkedCodec().Decode(b); codeOf(err) != CodeMalformedFrame {
			t.Fatalf("%s with flipped fatal decoded: %v", spec.Code, err)
		}
	}
	// A namespace code sent with connection scope (and vice versa) is malformed; INTERNAL_ERROR
	// exists in both and follows the scope's own row.
	if _, err := NewErrorMessage(ScopeConnection, CodeUpdateTooLarge, NamespaceID{}, ""); err == nil {
		t.Fatal("namespace code accepted with connection scope")
	}
	wrong := &ErrorMessage{Scope: ScopeConnection, Code: CodeUpdateTooLarge, Fatal: true, Retryable: true}
	if _, err := chunkedCodec().AppendFrame(nil, 1, wrong); codeOf(err) != CodeMalformedFrame {
		t.Fatalf("cross-scope code encoded: %v", err)
	}
	ci, _ := NewErrorMessage(ScopeConnection, CodeInternalError, NamespaceID{}, "")
	ni, _ := NewErrorMessage(ScopeNamespace, CodeInternalError, nsA, "")
	if ci == nil || ni == nil || !ci.Retryable || !ni.Retryable {
		t.Fatal("INTERNAL_ERROR rows")
	}
	// Unknown codes are accepted on decode (append-only registry) with the sender's values.
	unknown := &ErrorMessage{Scope: ScopeConnection, Code: "FUTURE_CODE", Fatal: false, Retryable: false, SafeMessage: "later"}
	f, err := chunkedCodec().Decode(encode(t, 1, unknown))
	if err != nil || !reflect.DeepEqual(f.Message, unknown) {
		t.Fatalf("unknown code: %v %#v", err, f.Message)
	}
}

func TestS13_ErrorNamespacePresenceFollowsScope(t *testing.T) {
	for _, m := range []*ErrorMessage{
		{Scope: ScopeConnection, Code: CodeMalformedFrame, Fatal: true, NamespaceID: nsA},
		{Scope: ScopeNamespace, Code: CodeAckTimeout, Retryable: true},
		{Scope: 2, Code: "X"},
		{Scope: ScopeConnection, Code: "X", RelatedSequence: 3},
		{Scope: ScopeConnection, Code: "bad code\n"},
		{Scope: ScopeConnection, Code: ErrorCode(strings.Repeat("A", 257))},
		{Scope: ScopeConnection, Code: "X", SafeMessage: "é"},
	} {
		if _, err := chunkedCodec().AppendFrame(nil, 1, m); codeOf(err) != CodeMalformedFrame {
			t.Errorf("%+v encoded: %v", m, err)
		}
	}
}

// codeOf returns the code of an *Error, or "" for nil or another error.
func codeOf(err error) ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
