package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nomicore/nomicore/lib0"
)

// TestS4_NamespaceRouting: every namespace-scope message exposes its namespaceId for routing,
// and the registry scope of each type is the contract's (docs/protocol.md#message-table).
func TestS4_NamespaceRouting(t *testing.T) {
	for _, s := range samples() {
		nm, ok := s.msg.(NamespaceMessage)
		isNS := s.msg.Type().Scope() == ScopeNamespace
		if isNS != ok && s.msg.Type() != TypeError {
			t.Fatalf("%s: NamespaceMessage %v, registry scope %v", s.name, ok, s.msg.Type().Scope())
		}
		if isNS && nm.Namespace().IsZero() {
			t.Fatalf("%s: no namespace", s.name)
		}
	}
	for _, c := range []struct {
		t    MessageType
		want Scope
	}{{TypeHello, ScopeConnection}, {TypeGoAway, ScopeConnection}, {TypeOpenNamespace, ScopeNamespace}, {TypeUpdateChunk, ScopeNamespace}} {
		if c.t.Scope() != c.want {
			t.Errorf("%v scope %v", c.t, c.t.Scope())
		}
	}
	e, _ := NewErrorMessage(ScopeNamespace, CodeApplyFailed, nsB, "x")
	if e.Namespace() != nsB || e.WithRelatedSequence(5).RelatedSequence != 5 || !e.HasRelatedSequence {
		t.Fatal("ERROR namespace / related sequence")
	}
	if spec, ok := e.Spec(); !ok || spec.Terminal != TerminalFailed || spec.Retry != RetryReconnect {
		t.Fatalf("ERROR spec %+v", spec)
	}
}

func TestS1_NamespaceIDText(t *testing.T) {
	var id NamespaceID
	if err := json.Unmarshal([]byte(`"ns-fedcba9876543210fedcba9876543210"`), &id); err != nil || id != nsB {
		t.Fatalf("unmarshal: %v", err)
	}
	b, err := json.Marshal(nsA)
	if err != nil || string(b) != `"ns-0123456789abcdef0123456789abcdef"` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	for _, bad := range []string{"", "ns-", "NS-0123456789abcdef0123456789abcdef", "ns-0123456789abcdef0123456789abcdeg", strings.Repeat("x", 300)} {
		if _, err := ParseNamespaceID(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
		if err := id.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("unmarshalled %q", bad)
		}
	}
	if _, err := (NamespaceID{}).MarshalText(); err == nil || (NamespaceID{}).String() != "" {
		t.Fatal("zero NamespaceID")
	}
}

// TestS13_ErrorDescribesItself: the local error text names code, scope, frame and rule, and
// unwraps to the lib0 cause.
func TestS13_ErrorDescribesItself(t *testing.T) {
	b := encode(t, 6, &UpdateAck{NamespaceID: nsA, AckedSequence: 1})
	b = append(b, 0)
	setPayloadLength(b, uint32(len(b)-HeaderLen))
	_, err := chunkedCodec().Decode(b)
	if !errors.Is(err, lib0.ErrTrailing) {
		t.Fatalf("cause not unwrapped: %v", err)
	}
	if s := err.Error(); !strings.Contains(s, "MALFORMED_FRAME") || !strings.Contains(s, "UPDATE_ACK #6") || !strings.Contains(s, "trailing") {
		t.Fatalf("error text %q", s)
	}
	lim := testLimits()
	lim.MaxUpdateBytes = 1
	_, err = NewCodec(lim, 0).Decode(encode(t, 2, &Update{NamespaceID: nsA, Update: []byte{1, 2}}))
	if s := err.Error(); !strings.Contains(s, "UPDATE_TOO_LARGE (namespace "+nsA.String()+")") {
		t.Fatalf("error text %q", s)
	}
	h, err := chunkedCodec().ParseHeader(b[:HeaderLen+1])
	if codeOf(err) != CodeFrameLengthMismatch || h.Type != TypeUpdateAck || h.Sequence != 6 {
		t.Fatalf("ParseHeader: %+v %v", h, err)
	}
	if h, err := chunkedCodec().ParseHeader(b); err != nil || h.PayloadLength != uint32(len(b)-HeaderLen) {
		t.Fatalf("ParseHeader: %+v %v", h, err)
	}
}
