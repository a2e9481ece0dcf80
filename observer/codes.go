package observer

// ConnectionCode is the closed set of codes connection-failed.code may hold (the
// stable code unions of docs/protocol.md#event-codes): the 17 codes of the
// connection error registry plus two local codes that never travel in a frame
// (PONG_TIMEOUT, OUTBOUND_SEQUENCE_EXHAUSTED). Unknown strings fold to
// INTERNAL_ERROR (FoldConnectionCode), so a peer cannot grow the set of metric
// labels.
type ConnectionCode string

// The connection error registry.
const (
	ConnErrBadMagic                   ConnectionCode = "BAD_MAGIC"
	ConnErrUnsupportedEnvelopeVersion ConnectionCode = "UNSUPPORTED_ENVELOPE_VERSION"
	ConnErrMalformedFrame             ConnectionCode = "MALFORMED_FRAME"
	ConnErrFrameLengthMismatch        ConnectionCode = "FRAME_LENGTH_MISMATCH"
	ConnErrFrameTooLarge              ConnectionCode = "FRAME_TOO_LARGE"
	ConnErrUnsupportedFlags           ConnectionCode = "UNSUPPORTED_FLAGS"
	ConnErrUnsupportedMessageType     ConnectionCode = "UNSUPPORTED_MESSAGE_TYPE"
	ConnErrSequenceViolation          ConnectionCode = "SEQUENCE_VIOLATION"
	ConnErrHelloRequired              ConnectionCode = "HELLO_REQUIRED"
	ConnErrHelloTimeout               ConnectionCode = "HELLO_TIMEOUT"
	ConnErrUnsupportedProtocolVersion ConnectionCode = "UNSUPPORTED_PROTOCOL_VERSION"
	ConnErrUnsupportedCapability      ConnectionCode = "UNSUPPORTED_CAPABILITY"
	ConnErrInstanceIdentityMismatch   ConnectionCode = "INSTANCE_IDENTITY_MISMATCH"
	ConnErrConnectionPolicyViolation  ConnectionCode = "CONNECTION_POLICY_VIOLATION"
	ConnErrAckStateViolation          ConnectionCode = "ACK_STATE_VIOLATION"
	ConnErrConnectionBackpressure     ConnectionCode = "CONNECTION_BACKPRESSURE"
	ConnErrInternalError              ConnectionCode = "INTERNAL_ERROR"
)

// Local connection codes (no wire frame).
const (
	ConnErrPongTimeout               ConnectionCode = "PONG_TIMEOUT"
	ConnErrOutboundSequenceExhausted ConnectionCode = "OUTBOUND_SEQUENCE_EXHAUSTED"
)

var connectionCodes = foldingVocab(ConnErrInternalError, ConnErrBadMagic,
	ConnErrUnsupportedEnvelopeVersion, ConnErrMalformedFrame, ConnErrFrameLengthMismatch,
	ConnErrFrameTooLarge, ConnErrUnsupportedFlags, ConnErrUnsupportedMessageType,
	ConnErrSequenceViolation, ConnErrHelloRequired, ConnErrHelloTimeout,
	ConnErrUnsupportedProtocolVersion, ConnErrUnsupportedCapability,
	ConnErrInstanceIdentityMismatch, ConnErrConnectionPolicyViolation, ConnErrAckStateViolation,
	ConnErrConnectionBackpressure, ConnErrInternalError, ConnErrPongTimeout,
	ConnErrOutboundSequenceExhausted)

// ConnectionCodes lists the 19 members of the union in registry order, the two
// local codes last.
func ConnectionCodes() []ConnectionCode { return connectionCodes.list() }

// Valid reports membership in the union.
func (c ConnectionCode) Valid() bool { return connectionCodes.has(c) }

// FoldConnectionCode maps any string to the union: members map to themselves,
// everything else to INTERNAL_ERROR.
func FoldConnectionCode(s string) ConnectionCode { return connectionCodes.fold(s) }

// NamespaceCode is the closed set of codes namespace-error.code may hold: the 26
// codes of the namespace error registry plus IDENTITY_CHANGED (the frame that
// fences a session after an epoch bump, named after its message). Unknown strings
// fold to INTERNAL_ERROR.
type NamespaceCode string

// The namespace error registry.
const (
	NsErrTargetNotRequested        NamespaceCode = "TARGET_NOT_REQUESTED"
	NsErrReopenRequiresReconnect   NamespaceCode = "NAMESPACE_REOPEN_REQUIRES_RECONNECT"
	NsErrNamespaceUnauthorized     NamespaceCode = "NAMESPACE_UNAUTHORIZED"
	NsErrNamespaceNotFound         NamespaceCode = "NAMESPACE_NOT_FOUND"
	NsErrReplicationNotEnabled     NamespaceCode = "REPLICATION_NOT_ENABLED"
	NsErrReplicationIDMismatch     NamespaceCode = "REPLICATION_ID_MISMATCH"
	NsErrReplicationEpochMismatch  NamespaceCode = "REPLICATION_EPOCH_MISMATCH"
	NsErrNamespaceStateViolation   NamespaceCode = "NAMESPACE_STATE_VIOLATION"
	NsErrSyncStateViolation        NamespaceCode = "SYNC_STATE_VIOLATION"
	NsErrBootstrapTooLarge         NamespaceCode = "BOOTSTRAP_TOO_LARGE"
	NsErrBootstrapFailed           NamespaceCode = "BOOTSTRAP_FAILED"
	NsErrSyncDiffTooLarge          NamespaceCode = "SYNC_DIFF_TOO_LARGE"
	NsErrUpdateTooLarge            NamespaceCode = "UPDATE_TOO_LARGE"
	NsErrProtectedFieldMutation    NamespaceCode = "PROTECTED_FIELD_MUTATION"
	NsErrRoleViolation             NamespaceCode = "ROLE_VIOLATION"
	NsErrPersistenceDegraded       NamespaceCode = "PERSISTENCE_DEGRADED"
	NsErrApplyFailed               NamespaceCode = "APPLY_FAILED"
	NsErrAckTimeout                NamespaceCode = "ACK_TIMEOUT"
	NsErrNamespaceTimeout          NamespaceCode = "NAMESPACE_TIMEOUT"
	NsErrInternalError             NamespaceCode = "INTERNAL_ERROR"
	NsErrUpdateTransferViolation   NamespaceCode = "UPDATE_TRANSFER_VIOLATION"
	NsErrUpdateTransferTooLarge    NamespaceCode = "UPDATE_TRANSFER_TOO_LARGE"
	NsErrSnapshotTransferViolation NamespaceCode = "SNAPSHOT_TRANSFER_VIOLATION"
	NsErrSnapshotTransferTooLarge  NamespaceCode = "SNAPSHOT_TRANSFER_TOO_LARGE"
	NsErrSyncTransferViolation     NamespaceCode = "SYNC_TRANSFER_VIOLATION"
	NsErrSyncTransferTooLarge      NamespaceCode = "SYNC_TRANSFER_TOO_LARGE"
	// NsErrNamespaceDeleted is the namespace-deletion extension's code.
	NsErrNamespaceDeleted NamespaceCode = "NAMESPACE_DELETED"
)

// NsErrIdentityChanged is the local namespace code of the IDENTITY_CHANGED fence
// frame.
const NsErrIdentityChanged NamespaceCode = "IDENTITY_CHANGED"

// namespaceTerminal gives each union member the terminal state the namespace
// error registry (docs/protocol.md#namespace-errors) gives it, already clamped
// for events (ACK_TIMEOUT's needs-resync → failed). IDENTITY_CHANGED leads to
// conflicted: the fenced peer enters conflicted.
var namespaceTerminal = []struct {
	code     NamespaceCode
	terminal TerminalState
}{
	{NsErrTargetNotRequested, TerminalFailed},
	{NsErrReopenRequiresReconnect, TerminalClosed},
	{NsErrNamespaceUnauthorized, TerminalFailed},
	{NsErrNamespaceNotFound, TerminalFailed},
	{NsErrReplicationNotEnabled, TerminalFailed},
	{NsErrReplicationIDMismatch, TerminalConflicted},
	{NsErrReplicationEpochMismatch, TerminalConflicted},
	{NsErrNamespaceStateViolation, TerminalFailed},
	{NsErrSyncStateViolation, TerminalFailed},
	{NsErrBootstrapTooLarge, TerminalFailed},
	{NsErrBootstrapFailed, TerminalFailed},
	{NsErrSyncDiffTooLarge, TerminalFailed},
	{NsErrUpdateTooLarge, TerminalFailed},
	{NsErrProtectedFieldMutation, TerminalFailed},
	{NsErrRoleViolation, TerminalFailed},
	{NsErrPersistenceDegraded, TerminalFailed},
	{NsErrApplyFailed, TerminalFailed},
	{NsErrAckTimeout, TerminalFailed}, // registry: needs-resync, clamped
	{NsErrNamespaceTimeout, TerminalFailed},
	{NsErrInternalError, TerminalFailed},
	{NsErrUpdateTransferViolation, TerminalFailed},
	{NsErrUpdateTransferTooLarge, TerminalFailed},
	{NsErrSnapshotTransferViolation, TerminalFailed},
	{NsErrSnapshotTransferTooLarge, TerminalFailed},
	{NsErrSyncTransferViolation, TerminalFailed},
	{NsErrSyncTransferTooLarge, TerminalFailed},
	{NsErrNamespaceDeleted, TerminalClosed},
	{NsErrIdentityChanged, TerminalConflicted},
}

// namespaceCodes is the union, in the order of namespaceTerminal.
var namespaceCodes = func() *vocab[NamespaceCode] {
	codes := make([]NamespaceCode, len(namespaceTerminal))
	for i, e := range namespaceTerminal {
		codes[i] = e.code
	}
	return foldingVocab(NsErrInternalError, codes...)
}()

// NamespaceCodes lists the 27 members of the union in registry order,
// IDENTITY_CHANGED last.
func NamespaceCodes() []NamespaceCode { return namespaceCodes.list() }

// Valid reports membership in the union.
func (c NamespaceCode) Valid() bool { return namespaceCodes.has(c) }

// TerminalState is the namespace-error.terminalState for this code: the
// registry's terminal state with needs-resync clamped to failed. It is absent for
// a code outside the union.
func (c NamespaceCode) TerminalState() Opt[TerminalState] {
	for _, e := range namespaceTerminal {
		if e.code == c {
			return Some(e.terminal)
		}
	}
	return None[TerminalState]()
}

// FoldNamespaceCode maps any string to the union: members map to themselves,
// everything else — including the schema re-arm codes, which are a domain of
// their own — to INTERNAL_ERROR.
func FoldNamespaceCode(s string) NamespaceCode { return namespaceCodes.fold(s) }
