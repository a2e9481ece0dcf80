package protocol

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The message registry of docs/protocol.md#message-table (code, message, scope, direction),
// transcribed from the contract, followed by the columns this implementation adds:
// acknowledged by (the acknowledgement whose ackedSequence names the frame), starts work
// (docs/protocol.md#draining drain filter), lane (docs/protocol.md#backpressure), ends the
// namespace (docs/protocol.md#identity-fencing, docs/protocol.md#closing-a-namespace), answers
// an OPEN, and the violation code (docs/protocol.md#round-rules for the round frames).
const contractMessageTable = `
0x01	HELLO	connection	Peer→Hub	-	-	control	-	-	-
0x02	HELLO_ACK	connection	Hub→Peer	-	-	control	-	-	-
0x03	GOAWAY	connection	either	-	-	control	-	-	-
0x04	ERROR	either	either	-	-	control	-	answers	NAMESPACE_STATE_VIOLATION
0x10	OPEN_NAMESPACE	namespace	Peer→Hub	-	starts	control	-	-	NAMESPACE_STATE_VIOLATION
0x11	OPEN_OK	namespace	Hub→Peer	-	-	control	-	answers	NAMESPACE_STATE_VIOLATION
0x12	CLOSE_NAMESPACE	namespace	either	CLOSE_OK	-	control	-	-	NAMESPACE_STATE_VIOLATION
0x13	CLOSE_OK	namespace	either	-	-	control	ends	-	NAMESPACE_STATE_VIOLATION
0x20	BOOTSTRAP_SNAPSHOT	namespace	Hub→Peer	BOOTSTRAP_ACK	-	control	-	-	NAMESPACE_STATE_VIOLATION
0x21	BOOTSTRAP_ACK	namespace	Peer→Hub	-	-	control	-	-	NAMESPACE_STATE_VIOLATION
0x22	IDENTITY_CHANGED	namespace	Hub→Peer	-	-	control	ends	-	NAMESPACE_STATE_VIOLATION
0x30	SYNC_STEP1	namespace	either	-	starts	control	-	-	SYNC_STATE_VIOLATION
0x31	SYNC_STEP2	namespace	either	SYNC_APPLIED	-	control	-	-	SYNC_STATE_VIOLATION
0x32	SYNC_APPLIED	namespace	either	-	-	control	-	-	SYNC_STATE_VIOLATION
0x33	RESYNC_REQUIRED	namespace	either	-	starts	control	-	-	SYNC_STATE_VIOLATION
0x40	UPDATE	namespace	either	UPDATE_ACK	starts	data	-	-	NAMESPACE_STATE_VIOLATION
0x41	UPDATE_ACK	namespace	either	-	-	control	-	-	NAMESPACE_STATE_VIOLATION
0x42	UPDATE_CHUNK	namespace	either	-	starts	data	-	-	NAMESPACE_STATE_VIOLATION
`

func TestS5_MessageRulesMatchTheContract(t *testing.T) {
	var rules []MessageRule // the contract's; this implementation's extensions are checked below
	for _, r := range MessageRules() {
		if r.Requires&CapPresence != 0 {
			if want := (MessageRule{Type: TypePresence, Name: "PRESENCE", Scope: ScopeNamespace, Direction: EitherWay,
				Lane: LanePresence, Violation: CodeNamespaceStateViolation, Requires: CapPresence}); r.Type != want.Type ||
				r.Name != want.Name || r.Scope != want.Scope || r.Direction != want.Direction || r.AckedBy != 0 ||
				r.StartsWork || r.Lane != want.Lane || r.EndsNamespace || r.AnswersOpen || r.Violation != want.Violation {
				t.Errorf("the presence extension's rule %+v", r)
			}
			continue
		}
		rules = append(rules, r)
	}
	lines := strings.Split(strings.TrimSpace(contractMessageTable), "\n")
	if len(rules) != len(lines) {
		t.Fatalf("%d rules, want %d", len(rules), len(lines))
	}
	dash := func(ok bool, s string) string {
		if ok {
			return s
		}
		return "-"
	}
	for i, r := range rules {
		scope := r.Scope.String()
		if r.Type == TypeError {
			scope = "either" // its scope byte decides
		}
		acked := "-"
		if r.AckedBy != 0 {
			acked = r.AckedBy.String()
		}
		violation := string(r.Violation)
		if violation == "" {
			violation = "-"
		}
		got := strings.Join([]string{fmt.Sprintf("0x%02x", uint8(r.Type)), r.Name, scope, r.Direction.String(), acked,
			dash(r.StartsWork, "starts"), r.Lane.String(), dash(r.EndsNamespace, "ends"), dash(r.AnswersOpen, "answers"),
			violation}, "\t")
		if got != lines[i] {
			t.Errorf("rule\n  %s\nwant\n  %s", got, lines[i])
		}
		if r.Type.String() != r.Name || r.Type.Scope() != r.Scope || !r.Type.Known() {
			t.Errorf("%v: String %q, Scope %v, Known %v disagree with its rule", r.Type, r.Type.String(), r.Type.Scope(), r.Type.Known())
		}
		if (r.Requires != 0) != (r.Type == TypeUpdateChunk) {
			t.Errorf("%v requires %v", r.Type, r.Requires)
		}
	}
	if r := MessageType(0x50).Rule(); r.Name != "" || r.Type != 0 {
		t.Errorf("an unknown type has the rule %+v", r)
	}
}

// TestS5_ConstructorsAndDecoderAgreeWithTheRules: every row builds its own type, the decoder's
// list of types (kept apart for speed) covers the same set, and the acknowledgements named
// in AckedBy are exactly the messages that carry an ackedSequence.
func TestS5_ConstructorsAndDecoderAgreeWithTheRules(t *testing.T) {
	sampled := map[MessageType]Message{}
	for _, s := range samples() {
		sampled[s.msg.Type()] = s.msg
	}
	ackedBy := map[MessageType]bool{}
	for _, r := range MessageRules() {
		if r.AckedBy != 0 {
			ackedBy[r.AckedBy] = true
		}
	}
	for k := range kindRules {
		ackedBy[ChunkKind(k).AckedBy()] = true
	}
	for _, r := range MessageRules() {
		m := newMessage(r.Type)
		if m == nil || m.Type() != r.Type {
			t.Fatalf("%v: the rule builds %T", r.Type, m)
		}
		s, ok := sampled[r.Type]
		if !ok {
			t.Fatalf("%v has no sample message", r.Type)
		}
		codec := NewCodec(testLimits(), KnownCapabilities)
		frame, err := codec.AppendFrame(nil, 1, s)
		if err != nil {
			t.Fatal(err)
		}
		f, err := codec.Decode(frame)
		if err != nil || reflect.TypeOf(f.Message) != reflect.TypeOf(m) {
			t.Fatalf("%v decodes to %T (%v), the rule builds %T", r.Type, f.Message, err, m)
		}
		_, isAck := m.(Acknowledgement)
		if isAck != ackedBy[r.Type] {
			t.Errorf("%v: carries an ackedSequence %v, named as an acknowledgement %v", r.Type, isAck, ackedBy[r.Type])
		}
	}
	if newMessage(MessageType(0x50)) != nil {
		t.Error("an unknown type builds a message")
	}
}

func TestS10_3_KindRules(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxChunkedUpdateBytes, cfg.MaxChunkedBootstrapBytes, cfg.MaxChunkedSyncDiffBytes = 1, 2, 3
	for _, c := range []struct {
		k                              ChunkKind
		name                           string
		ack                            MessageType
		unchunked, tooLarge, violation ErrorCode
		expiredResync                  string
		expiredFailure                 ErrorCode
		maxChunked                     int
	}{
		{KindLiveUpdate, "live-update", TypeUpdateAck, CodeUpdateTooLarge, CodeUpdateTransferTooLarge, CodeUpdateTransferViolation, ResyncUpdateTransferExpired, "", 1},
		{KindSnapshot, "snapshot", TypeBootstrapAck, CodeBootstrapTooLarge, CodeSnapshotTransferTooLarge, CodeSnapshotTransferViolation, "", CodeBootstrapFailed, 2},
		{KindSyncDiff, "sync-diff", TypeSyncApplied, CodeSyncDiffTooLarge, CodeSyncTransferTooLarge, CodeSyncTransferViolation, ResyncSyncTransferExpired, "", 3},
	} {
		r, ok := c.k.Rule()
		if !ok || r.Kind != c.k || !c.k.Known() {
			t.Fatalf("%v: no rule", c.k)
		}
		if c.k.String() != c.name || c.k.AckedBy() != c.ack || c.k.UnchunkedCode() != c.unchunked ||
			c.k.TooLargeCode() != c.tooLarge || c.k.ViolationCode() != c.violation ||
			c.k.ExpiredResyncReason() != c.expiredResync || c.k.ExpiredFailure() != c.expiredFailure ||
			cfg.MaxChunkedBytes(c.k) != c.maxChunked {
			t.Errorf("%v: %+v", c.k, r)
		}
	}
	if _, ok := ChunkKind(3).Rule(); ok || ChunkKind(3).Known() {
		t.Error("kind 3 has a rule")
	}
}

func TestS5_PayloadDependentRules(t *testing.T) {
	nsErrFatal := &ErrorMessage{Scope: ScopeNamespace, Code: CodeNamespaceNotFound, Fatal: true, NamespaceID: nsA}
	nsErrSoft := &ErrorMessage{Scope: ScopeNamespace, Code: CodeAckTimeout, NamespaceID: nsA}
	connErr := &ErrorMessage{Scope: ScopeConnection, Code: CodeInternalError, Fatal: true}
	for _, c := range []struct {
		m            Message
		scope        Scope
		ends, answer bool
	}{
		{nsErrFatal, ScopeNamespace, true, true},
		{nsErrSoft, ScopeNamespace, false, true},
		{connErr, ScopeConnection, false, false},
		{&CloseOK{NamespaceID: nsA}, ScopeNamespace, true, false},
		{&IdentityChanged{NamespaceID: nsA}, ScopeNamespace, true, false},
		{&OpenOK{NamespaceID: nsA}, ScopeNamespace, false, true},
		{&CloseNamespace{NamespaceID: nsA}, ScopeNamespace, false, false},
		{&GoAway{}, ScopeConnection, false, false},
	} {
		ns, ends := EndsNamespace(c.m)
		if ends != c.ends || (ends && ns != nsA) {
			t.Errorf("%v: EndsNamespace %v %v", c.m.Type(), ns, ends)
		}
		ns, answers := AnswersOpen(c.m)
		if answers != c.answer || (answers && ns != nsA) {
			t.Errorf("%v: AnswersOpen %v %v", c.m.Type(), ns, answers)
		}
		if got := ScopeOf(c.m); got != c.scope {
			t.Errorf("%v: ScopeOf %v", c.m.Type(), got)
		}
	}
}

func TestS5_DirectionsAndEndpoints(t *testing.T) {
	if EndpointHub.Remote() != EndpointPeer || EndpointPeer.Remote() != EndpointHub {
		t.Fatal("Remote")
	}
	for _, c := range []struct {
		d         Direction
		hub, peer bool
	}{{PeerToHub, false, true}, {HubToPeer, true, false}, {EitherWay, true, true}} {
		if c.d.SentBy(EndpointHub) != c.hub || c.d.SentBy(EndpointPeer) != c.peer {
			t.Errorf("%v: sent by hub %v, by peer %v", c.d, c.d.SentBy(EndpointHub), c.d.SentBy(EndpointPeer))
		}
	}
	if EndpointHub.String() != "hub" || Endpoint(0).String() != "UNKNOWN_ENDPOINT_0x00" || Lane(9).String() != "UNKNOWN_LANE_0x09" {
		t.Error("String")
	}
}

// TestS3_FrameSequenceAccessors: the sequence of an encoded frame is read and restamped in
// place, and the restamped frame decodes with the new sequence.
func TestS3_FrameSequenceAccessors(t *testing.T) {
	codec := NewCodec(testLimits(), 0)
	frame, err := codec.AppendFrame(nil, 7, &UpdateAck{NamespaceID: nsA, AckedSequence: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := FrameSequence(frame); got != 7 {
		t.Fatalf("FrameSequence %d, want 7", got)
	}
	SetFrameSequence(frame, 1<<31+5)
	f, err := codec.Decode(frame)
	if err != nil || f.Sequence != 1<<31+5 || FrameSequence(frame) != 1<<31+5 {
		t.Fatalf("restamped frame decodes as %+v, %v", f, err)
	}
	if CloseAbnormal.String() != "ABNORMAL_CLOSURE" || CloseAbnormal != 1006 {
		t.Errorf("CloseAbnormal %d %v", CloseAbnormal, CloseAbnormal)
	}
}
