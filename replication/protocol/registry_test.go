package protocol

import (
	"strconv"
	"strings"
	"testing"
)

// The registry tables of docs/protocol.md#connection-errors and
// docs/protocol.md#namespace-errors, transcribed from the contract as text.
const contractConnectionTable = `
BAD_MAGIC	yes	no	1002
UNSUPPORTED_ENVELOPE_VERSION	yes	no	1002
MALFORMED_FRAME	yes	no	1002
FRAME_LENGTH_MISMATCH	yes	no	1002
FRAME_TOO_LARGE	yes	config	1009
UNSUPPORTED_FLAGS	yes	no	1002
UNSUPPORTED_MESSAGE_TYPE	yes	no	1002
SEQUENCE_VIOLATION	yes	no	1002
HELLO_REQUIRED	yes	no	1002
HELLO_TIMEOUT	yes	yes	1002
UNSUPPORTED_PROTOCOL_VERSION	yes	config	1002
UNSUPPORTED_CAPABILITY	yes	config	1002
INSTANCE_IDENTITY_MISMATCH	yes	config	1008
CONNECTION_POLICY_VIOLATION	yes	config	1008
ACK_STATE_VIOLATION	yes	no	1002
CONNECTION_BACKPRESSURE	yes	yes	1011
INTERNAL_ERROR	yes	yes	1011
`

const contractNamespaceTable = `
TARGET_NOT_REQUESTED	yes	config	failed
NAMESPACE_REOPEN_REQUIRES_RECONNECT	yes	reconnect	closed
NAMESPACE_UNAUTHORIZED	yes	config	failed
NAMESPACE_NOT_FOUND	yes	config	failed
REPLICATION_NOT_ENABLED	yes	config	failed
REPLICATION_ID_MISMATCH	yes	reset	conflicted
REPLICATION_EPOCH_MISMATCH	yes	reset	conflicted
NAMESPACE_STATE_VIOLATION	yes	no	failed
SYNC_STATE_VIOLATION	yes	no	failed
BOOTSTRAP_TOO_LARGE	yes	config	failed
BOOTSTRAP_FAILED	yes	reconnect	failed
SYNC_DIFF_TOO_LARGE	yes	config	failed
UPDATE_TOO_LARGE	yes	config	failed
PROTECTED_FIELD_MUTATION	yes	no	failed
ROLE_VIOLATION	yes	no	failed
PERSISTENCE_DEGRADED	yes	recovery	failed
APPLY_FAILED	yes	reconnect	failed
ACK_TIMEOUT	no	resync	needs-resync
NAMESPACE_TIMEOUT	yes	reconnect	failed
INTERNAL_ERROR	yes	reconnect	failed
UPDATE_TRANSFER_VIOLATION	yes	no	failed
UPDATE_TRANSFER_TOO_LARGE	yes	config	failed
SNAPSHOT_TRANSFER_VIOLATION	yes	no	failed
SNAPSHOT_TRANSFER_TOO_LARGE	yes	config	failed
SYNC_TRANSFER_VIOLATION	yes	no	failed
SYNC_TRANSFER_TOO_LARGE	yes	config	failed
`

func TestS13_RegistriesMatchTheContract(t *testing.T) {
	check := func(table string, got []ErrorSpec, scope Scope) {
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(got) != len(lines) {
			t.Fatalf("%v registry has %d codes, the contract %d", scope, len(got), len(lines))
		}
		for i, line := range lines {
			f := strings.Split(line, "\t")
			want := ErrorSpec{Scope: scope, Code: ErrorCode(f[0]), Fatal: f[1] == "yes", Retry: Retry(f[2])}
			if scope == ScopeConnection {
				n, _ := strconv.Atoi(f[3])
				want.Close = CloseCode(n)
			} else {
				want.Terminal = TerminalState(f[3])
			}
			if got[i] != want {
				t.Errorf("row %d: %+v, contract %+v", i, got[i], want)
			}
			if s, ok := LookupError(scope, want.Code); !ok || s != want {
				t.Errorf("LookupError(%v, %s) = %+v, %v", scope, want.Code, s, ok)
			}
		}
	}
	check(contractConnectionTable, ConnectionErrors(), ScopeConnection)
	// The contract's codes first; the extensions' codes after them.
	ns := NamespaceErrors()
	check(contractNamespaceTable, ns[:len(ns)-1], ScopeNamespace)
	if ext := ns[len(ns)-1]; ext != (ErrorSpec{ScopeNamespace, CodeNamespaceDeleted, true, RetryNo, 0, TerminalClosed}) {
		t.Errorf("the namespace-deletion extension's row: %+v", ext)
	}
	if _, ok := LookupError(ScopeConnection, CodeUpdateTooLarge); ok {
		t.Error("UPDATE_TOO_LARGE is not a connection code")
	}
}

// TestS14_CloseCodes: the close code of each connection error follows the coarse classes
// of docs/protocol.md#close-codes.
func TestS14_CloseCodes(t *testing.T) {
	want := map[ErrorCode]CloseCode{
		CodeFrameTooLarge:             CloseTooBig,
		CodeInstanceIdentityMismatch:  ClosePolicy,
		CodeConnectionPolicyViolation: ClosePolicy,
		CodeConnectionBackpressure:    CloseInternal,
		CodeInternalError:             CloseInternal,
	}
	for _, s := range ConnectionErrors() {
		w, ok := want[s.Code]
		if !ok {
			w = CloseProtocolError
		}
		e := &Error{Code: s.Code, Scope: ScopeConnection}
		if e.CloseCode() != w {
			t.Errorf("%s closes with %v, want %v", s.Code, e.CloseCode(), w)
		}
	}
}

func TestS5_NamedTypesPrintUnknownValues(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{TypeUpdateChunk.String(), "UPDATE_CHUNK"},
		{MessageType(0x50).String(), "UNKNOWN_MESSAGE_TYPE_0x50"},
		{Scope(7).String(), "UNKNOWN_SCOPE_0x07"},
		{OpenMode(2).String(), "UNKNOWN_OPEN_MODE_0x02"},
		{ChunkKind(3).String(), "UNKNOWN_CHUNK_KIND_0x03"},
		{KindSyncDiff.String(), "sync-diff"},
		{CloseCode(4000).String(), "UNKNOWN_CLOSE_CODE_4000"},
		{(CapChunkedUpdate | 8).String(), "CAP_CHUNKED_UPDATE|0x00000008"},
		{(CapChunkedUpdate | CapNamespaceDeleted | CapPresence | 16).String(), "CAP_CHUNKED_UPDATE|CAP_NAMESPACE_DELETED|CAP_PRESENCE|0x00000010"},
		{Capability(0).String(), "0"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	n := 0
	for i := range 256 {
		if MessageType(i).Known() {
			n++
		}
	}
	if n != 19 { // the contract's 18 and the presence extension's PRESENCE
		t.Fatalf("%d registered message types, want 19", n)
	}
}
