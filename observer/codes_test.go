package observer_test

import (
	"slices"
	"testing"

	o "github.com/nomicore/nomicore/observer"
)

// docs/protocol.md#connection-errors copied by hand, plus the two docs/protocol.md#event-codes
// local codes.
const connectionCodes = `BAD_MAGIC UNSUPPORTED_ENVELOPE_VERSION MALFORMED_FRAME FRAME_LENGTH_MISMATCH
FRAME_TOO_LARGE UNSUPPORTED_FLAGS UNSUPPORTED_MESSAGE_TYPE SEQUENCE_VIOLATION HELLO_REQUIRED
HELLO_TIMEOUT UNSUPPORTED_PROTOCOL_VERSION UNSUPPORTED_CAPABILITY INSTANCE_IDENTITY_MISMATCH
CONNECTION_POLICY_VIOLATION ACK_STATE_VIOLATION CONNECTION_BACKPRESSURE INTERNAL_ERROR
PONG_TIMEOUT OUTBOUND_SEQUENCE_EXHAUSTED`

// docs/protocol.md#namespace-errors copied by hand with each terminal state, plus
// IDENTITY_CHANGED.
var namespaceTerminal = [][2]string{
	{"TARGET_NOT_REQUESTED", "failed"}, {"NAMESPACE_REOPEN_REQUIRES_RECONNECT", "closed"},
	{"NAMESPACE_UNAUTHORIZED", "failed"}, {"NAMESPACE_NOT_FOUND", "failed"},
	{"REPLICATION_NOT_ENABLED", "failed"}, {"REPLICATION_ID_MISMATCH", "conflicted"},
	{"REPLICATION_EPOCH_MISMATCH", "conflicted"}, {"NAMESPACE_STATE_VIOLATION", "failed"},
	{"SYNC_STATE_VIOLATION", "failed"}, {"BOOTSTRAP_TOO_LARGE", "failed"},
	{"BOOTSTRAP_FAILED", "failed"}, {"SYNC_DIFF_TOO_LARGE", "failed"},
	{"UPDATE_TOO_LARGE", "failed"}, {"PROTECTED_FIELD_MUTATION", "failed"},
	{"ROLE_VIOLATION", "failed"}, {"PERSISTENCE_DEGRADED", "failed"},
	{"APPLY_FAILED", "failed"}, {"ACK_TIMEOUT", "needs-resync"},
	{"NAMESPACE_TIMEOUT", "failed"}, {"INTERNAL_ERROR", "failed"},
	{"UPDATE_TRANSFER_VIOLATION", "failed"}, {"UPDATE_TRANSFER_TOO_LARGE", "failed"},
	{"SNAPSHOT_TRANSFER_VIOLATION", "failed"}, {"SNAPSHOT_TRANSFER_TOO_LARGE", "failed"},
	{"SYNC_TRANSFER_VIOLATION", "failed"}, {"SYNC_TRANSFER_TOO_LARGE", "failed"},
	{"NAMESPACE_DELETED", "closed"},
	{"IDENTITY_CHANGED", "conflicted"},
}

func TestS23_2_ConnectionCodeUnion(t *testing.T) {
	if got, want := asStrings(o.ConnectionCodes()), words(connectionCodes); !slices.Equal(got, want) {
		t.Fatalf("ConnectionCodes:\n got %v\nwant %v", got, want)
	}
	for _, c := range words(connectionCodes) {
		if got := o.FoldConnectionCode(c); string(got) != c {
			t.Errorf("FoldConnectionCode(%q) = %q", c, got)
		}
	}
	for _, unknown := range []string{"", "bad_magic", "NAMESPACE_NOT_FOUND", "PROTOCOL_ERROR", "connection reset by peer"} {
		if got := o.FoldConnectionCode(unknown); got != o.ConnErrInternalError {
			t.Errorf("FoldConnectionCode(%q) = %q, want INTERNAL_ERROR", unknown, got)
		}
	}
}

func TestS23_2_NamespaceCodeUnion(t *testing.T) {
	var want []string
	for _, e := range namespaceTerminal {
		want = append(want, e[0])
	}
	if got := asStrings(o.NamespaceCodes()); !slices.Equal(got, want) {
		t.Fatalf("NamespaceCodes:\n got %v\nwant %v", got, want)
	}
	for _, e := range namespaceTerminal {
		code := o.FoldNamespaceCode(e[0])
		if string(code) != e[0] {
			t.Errorf("FoldNamespaceCode(%q) = %q", e[0], code)
		}
		// docs/protocol.md#event-codes: the registry's terminal state, needs-resync clamped to
		// failed.
		wantTerm := o.ClampTerminalState(e[1])
		if got := code.TerminalState(); got != wantTerm || !got.Present() {
			t.Errorf("%s.TerminalState() = %v, want %v", code, got, wantTerm)
		}
	}
	// The schema re-arm codes are a domain of their own: they fold like any unknown code.
	for _, unknown := range []string{"", "HELLO_TIMEOUT", "NSRT-FATAL-SCHEMA-REARM-INVALID", "apply failed: boom"} {
		if got := o.FoldNamespaceCode(unknown); got != o.NsErrInternalError {
			t.Errorf("FoldNamespaceCode(%q) = %q, want INTERNAL_ERROR", unknown, got)
		}
	}
	if o.NamespaceCode("NOPE").TerminalState().Present() {
		t.Error("a code outside the union has no terminal state")
	}
}

func TestS23_2_TerminalStateClamp(t *testing.T) {
	for in, want := range map[string]o.Opt[o.TerminalState]{
		"needs-resync": o.Some(o.TerminalFailed),
		"failed":       o.Some(o.TerminalFailed),
		"conflicted":   o.Some(o.TerminalConflicted),
		"closed":       o.Some(o.TerminalClosed),
		"live":         o.None[o.TerminalState](),
		"":             o.None[o.TerminalState](),
	} {
		if got := o.ClampTerminalState(in); got != want {
			t.Errorf("ClampTerminalState(%q) = %v, want %v", in, got, want)
		}
	}
}
