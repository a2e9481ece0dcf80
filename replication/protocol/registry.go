package protocol

// ErrorCode is a stable error code of the append-only error registries
// (docs/protocol.md#errors; the ERROR frame's code field, a printable ASCII string). Codes
// outside the registries are valid values: they are accepted on decode and folded to
// INTERNAL_ERROR only in observer events.
type ErrorCode string

// String returns the code itself.
func (c ErrorCode) String() string { return string(c) }

// Connection error codes (docs/protocol.md#connection-errors).
const (
	CodeBadMagic                   ErrorCode = "BAD_MAGIC"
	CodeUnsupportedEnvelopeVersion ErrorCode = "UNSUPPORTED_ENVELOPE_VERSION"
	CodeMalformedFrame             ErrorCode = "MALFORMED_FRAME"
	CodeFrameLengthMismatch        ErrorCode = "FRAME_LENGTH_MISMATCH"
	CodeFrameTooLarge              ErrorCode = "FRAME_TOO_LARGE"
	CodeUnsupportedFlags           ErrorCode = "UNSUPPORTED_FLAGS"
	CodeUnsupportedMessageType     ErrorCode = "UNSUPPORTED_MESSAGE_TYPE"
	CodeSequenceViolation          ErrorCode = "SEQUENCE_VIOLATION"
	CodeHelloRequired              ErrorCode = "HELLO_REQUIRED"
	CodeHelloTimeout               ErrorCode = "HELLO_TIMEOUT"
	CodeUnsupportedProtocolVersion ErrorCode = "UNSUPPORTED_PROTOCOL_VERSION"
	CodeUnsupportedCapability      ErrorCode = "UNSUPPORTED_CAPABILITY"
	CodeInstanceIdentityMismatch   ErrorCode = "INSTANCE_IDENTITY_MISMATCH"
	CodeConnectionPolicyViolation  ErrorCode = "CONNECTION_POLICY_VIOLATION"
	CodeAckStateViolation          ErrorCode = "ACK_STATE_VIOLATION"
	CodeConnectionBackpressure     ErrorCode = "CONNECTION_BACKPRESSURE"
	CodeInternalError              ErrorCode = "INTERNAL_ERROR" // in both registries
)

// Namespace error codes (docs/protocol.md#namespace-errors). INTERNAL_ERROR is
// CodeInternalError.
const (
	CodeTargetNotRequested               ErrorCode = "TARGET_NOT_REQUESTED"
	CodeNamespaceReopenRequiresReconnect ErrorCode = "NAMESPACE_REOPEN_REQUIRES_RECONNECT"
	CodeNamespaceUnauthorized            ErrorCode = "NAMESPACE_UNAUTHORIZED"
	CodeNamespaceNotFound                ErrorCode = "NAMESPACE_NOT_FOUND"
	// CodeNamespaceDeleted needs CapNamespaceDeleted (docs/protocol.md#namespace-deletion).
	CodeNamespaceDeleted          ErrorCode = "NAMESPACE_DELETED"
	CodeReplicationNotEnabled     ErrorCode = "REPLICATION_NOT_ENABLED"
	CodeReplicationIDMismatch     ErrorCode = "REPLICATION_ID_MISMATCH"
	CodeReplicationEpochMismatch  ErrorCode = "REPLICATION_EPOCH_MISMATCH"
	CodeNamespaceStateViolation   ErrorCode = "NAMESPACE_STATE_VIOLATION"
	CodeSyncStateViolation        ErrorCode = "SYNC_STATE_VIOLATION"
	CodeBootstrapTooLarge         ErrorCode = "BOOTSTRAP_TOO_LARGE"
	CodeBootstrapFailed           ErrorCode = "BOOTSTRAP_FAILED"
	CodeSyncDiffTooLarge          ErrorCode = "SYNC_DIFF_TOO_LARGE"
	CodeUpdateTooLarge            ErrorCode = "UPDATE_TOO_LARGE"
	CodeProtectedFieldMutation    ErrorCode = "PROTECTED_FIELD_MUTATION"
	CodeRoleViolation             ErrorCode = "ROLE_VIOLATION"
	CodePersistenceDegraded       ErrorCode = "PERSISTENCE_DEGRADED"
	CodeApplyFailed               ErrorCode = "APPLY_FAILED"
	CodeAckTimeout                ErrorCode = "ACK_TIMEOUT"
	CodeNamespaceTimeout          ErrorCode = "NAMESPACE_TIMEOUT"
	CodeUpdateTransferViolation   ErrorCode = "UPDATE_TRANSFER_VIOLATION"
	CodeUpdateTransferTooLarge    ErrorCode = "UPDATE_TRANSFER_TOO_LARGE"
	CodeSnapshotTransferViolation ErrorCode = "SNAPSHOT_TRANSFER_VIOLATION"
	CodeSnapshotTransferTooLarge  ErrorCode = "SNAPSHOT_TRANSFER_TOO_LARGE"
	CodeSyncTransferViolation     ErrorCode = "SYNC_TRANSFER_VIOLATION"
	CodeSyncTransferTooLarge      ErrorCode = "SYNC_TRANSFER_TOO_LARGE"
)

// The local connection codes: they end a connection without a wire frame, so no registry
// row has them (the end of docs/protocol.md#connection-errors).
const (
	// CodeOutboundSequenceExhausted: a sending direction used every uint32 sequence (or a
	// namespace every transfer id).
	CodeOutboundSequenceExhausted ErrorCode = "OUTBOUND_SEQUENCE_EXHAUSTED"
	// CodePongTimeout: no pong answered a ping within pongTimeoutMs.
	CodePongTimeout ErrorCode = "PONG_TIMEOUT"
)

// Retry is the error registry's retryable column: whether, and after what, retrying can
// help.
type Retry string

const (
	RetryNo        Retry = "no"
	RetryYes       Retry = "yes"
	RetryConfig    Retry = "config"    // only after a configuration or deployment change
	RetryReconnect Retry = "reconnect" // on a new connection
	RetryReset     Retry = "reset"     // after a replica reset
	RetryRecovery  Retry = "recovery"  // after persistence recovers
	RetryResync    Retry = "resync"    // by a new state-vector round
)

// Wire is the ERROR frame's retryable bool for this value: true unless the registry says
// "no".
func (r Retry) Wire() bool { return r != RetryNo }

// TerminalState is the namespace state a namespace error leaves behind.
type TerminalState string

const (
	TerminalFailed      TerminalState = "failed"
	TerminalClosed      TerminalState = "closed"
	TerminalConflicted  TerminalState = "conflicted"
	TerminalNeedsResync TerminalState = "needs-resync"
)

// ErrorSpec is one row of an error registry: what a code means, fixed by the registry and never
// by the sender.
type ErrorSpec struct {
	Scope Scope
	Code  ErrorCode
	Fatal bool // fatal for the connection, or for the namespace
	Retry Retry
	// Close is the WebSocket close code of a connection error; 0 for namespace errors.
	Close CloseCode
	// Terminal is the state a namespace error leaves the namespace in; "" for
	// connection errors.
	Terminal TerminalState
}

// connectionRegistry is the table of docs/protocol.md#connection-errors, in its order.
var connectionRegistry = []ErrorSpec{
	{ScopeConnection, CodeBadMagic, true, RetryNo, CloseProtocolError, ""},
	{ScopeConnection, CodeUnsupportedEnvelopeVersion, true, RetryNo, CloseProtocolError, ""},
	{ScopeConnection, CodeMalformedFrame, true, RetryNo, CloseProtocolError, ""},
	{ScopeConnection, CodeFrameLengthMismatch, true, RetryNo, CloseProtocolError, ""},
	{ScopeConnection, CodeFrameTooLarge, true, RetryConfig, CloseTooBig, ""},
	{ScopeConnection, CodeUnsupportedFlags, true, RetryNo, CloseProtocolError, ""},
	{ScopeConnection, CodeUnsupportedMessageType, true, RetryNo, CloseProtocolError, ""},
	{ScopeConnection, CodeSequenceViolation, true, RetryNo, CloseProtocolError, ""},
	{ScopeConnection, CodeHelloRequired, true, RetryNo, CloseProtocolError, ""},
	{ScopeConnection, CodeHelloTimeout, true, RetryYes, CloseProtocolError, ""},
	{ScopeConnection, CodeUnsupportedProtocolVersion, true, RetryConfig, CloseProtocolError, ""},
	{ScopeConnection, CodeUnsupportedCapability, true, RetryConfig, CloseProtocolError, ""},
	{ScopeConnection, CodeInstanceIdentityMismatch, true, RetryConfig, ClosePolicy, ""},
	{ScopeConnection, CodeConnectionPolicyViolation, true, RetryConfig, ClosePolicy, ""},
	{ScopeConnection, CodeAckStateViolation, true, RetryNo, CloseProtocolError, ""},
	{ScopeConnection, CodeConnectionBackpressure, true, RetryYes, CloseInternal, ""},
	{ScopeConnection, CodeInternalError, true, RetryYes, CloseInternal, ""},
}

// namespaceRegistry is the table of docs/protocol.md#namespace-errors, in its order.
var namespaceRegistry = []ErrorSpec{
	{ScopeNamespace, CodeTargetNotRequested, true, RetryConfig, 0, TerminalFailed},
	{ScopeNamespace, CodeNamespaceReopenRequiresReconnect, true, RetryReconnect, 0, TerminalClosed},
	{ScopeNamespace, CodeNamespaceUnauthorized, true, RetryConfig, 0, TerminalFailed},
	{ScopeNamespace, CodeNamespaceNotFound, true, RetryConfig, 0, TerminalFailed},
	{ScopeNamespace, CodeReplicationNotEnabled, true, RetryConfig, 0, TerminalFailed},
	{ScopeNamespace, CodeReplicationIDMismatch, true, RetryReset, 0, TerminalConflicted},
	{ScopeNamespace, CodeReplicationEpochMismatch, true, RetryReset, 0, TerminalConflicted},
	{ScopeNamespace, CodeNamespaceStateViolation, true, RetryNo, 0, TerminalFailed},
	{ScopeNamespace, CodeSyncStateViolation, true, RetryNo, 0, TerminalFailed},
	{ScopeNamespace, CodeBootstrapTooLarge, true, RetryConfig, 0, TerminalFailed},
	{ScopeNamespace, CodeBootstrapFailed, true, RetryReconnect, 0, TerminalFailed},
	{ScopeNamespace, CodeSyncDiffTooLarge, true, RetryConfig, 0, TerminalFailed},
	{ScopeNamespace, CodeUpdateTooLarge, true, RetryConfig, 0, TerminalFailed},
	{ScopeNamespace, CodeProtectedFieldMutation, true, RetryNo, 0, TerminalFailed},
	{ScopeNamespace, CodeRoleViolation, true, RetryNo, 0, TerminalFailed},
	{ScopeNamespace, CodePersistenceDegraded, true, RetryRecovery, 0, TerminalFailed},
	{ScopeNamespace, CodeApplyFailed, true, RetryReconnect, 0, TerminalFailed},
	{ScopeNamespace, CodeAckTimeout, false, RetryResync, 0, TerminalNeedsResync},
	{ScopeNamespace, CodeNamespaceTimeout, true, RetryReconnect, 0, TerminalFailed},
	{ScopeNamespace, CodeInternalError, true, RetryReconnect, 0, TerminalFailed},
	{ScopeNamespace, CodeUpdateTransferViolation, true, RetryNo, 0, TerminalFailed},
	{ScopeNamespace, CodeUpdateTransferTooLarge, true, RetryConfig, 0, TerminalFailed},
	{ScopeNamespace, CodeSnapshotTransferViolation, true, RetryNo, 0, TerminalFailed},
	{ScopeNamespace, CodeSnapshotTransferTooLarge, true, RetryConfig, 0, TerminalFailed},
	{ScopeNamespace, CodeSyncTransferViolation, true, RetryNo, 0, TerminalFailed},
	{ScopeNamespace, CodeSyncTransferTooLarge, true, RetryConfig, 0, TerminalFailed},
	{ScopeNamespace, CodeNamespaceDeleted, true, RetryNo, 0, TerminalClosed},
}

var registryIndex = func() map[Scope]map[ErrorCode]ErrorSpec {
	idx := map[Scope]map[ErrorCode]ErrorSpec{ScopeConnection: {}, ScopeNamespace: {}}
	for _, rows := range [][]ErrorSpec{connectionRegistry, namespaceRegistry} {
		for _, s := range rows {
			idx[s.Scope][s.Code] = s
		}
	}
	return idx
}()

// LookupError returns the row of code in the registry of scope: the connection registry for
// ScopeConnection, the namespace registry for ScopeNamespace.
func LookupError(scope Scope, code ErrorCode) (ErrorSpec, bool) {
	s, ok := registryIndex[scope][code]
	return s, ok
}

// ConnectionErrors returns a copy of the connection error registry, in its order.
func ConnectionErrors() []ErrorSpec { return append([]ErrorSpec(nil), connectionRegistry...) }

// NamespaceErrors returns a copy of the namespace error registry, in its order.
func NamespaceErrors() []ErrorSpec { return append([]ErrorSpec(nil), namespaceRegistry...) }

// registered reports whether code appears in either registry.
func registered(code ErrorCode) bool {
	_, c := registryIndex[ScopeConnection][code]
	_, n := registryIndex[ScopeNamespace][code]
	return c || n
}
