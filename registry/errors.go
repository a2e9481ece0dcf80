package registry

import (
	"errors"
	"fmt"
)

// Code is the namespace error code an error maps to: the code the namespace layer sends in
// an ERROR frame when the operation fails (docs/protocol.md#namespace-errors). The
// strings equal the contract's codes; the registry does not import the protocol package
// (imports point registry ← replication), so the namespace layer converts a Code to its
// protocol constant by value, and a test checks every Code is a protocol namespace code.
type Code string

// The codes the registry produces.
const (
	CodeNamespaceNotFound        Code = "NAMESPACE_NOT_FOUND"
	CodeProtectedFieldMutation   Code = "PROTECTED_FIELD_MUTATION"
	CodeApplyFailed              Code = "APPLY_FAILED"
	CodeInternalError            Code = "INTERNAL_ERROR"
	CodePersistenceDegraded      Code = "PERSISTENCE_DEGRADED"
	CodeBootstrapFailed          Code = "BOOTSTRAP_FAILED"
	CodeReplicationIDMismatch    Code = "REPLICATION_ID_MISMATCH"
	CodeReplicationEpochMismatch Code = "REPLICATION_EPOCH_MISMATCH"
	CodeRoleViolation            Code = "ROLE_VIOLATION"
	// CodeNamespaceDeleted is the namespace-deleted extension's code
	// (docs/protocol.md#namespace-deletion); the namespace layer sends NAMESPACE_NOT_FOUND
	// instead on a connection that did not negotiate the extension.
	CodeNamespaceDeleted Code = "NAMESPACE_DELETED"
)

// Error is a classified registry error. Code is safe to put on the wire; Cause is internal
// detail (a decoder message, a store error) for logs, never for the wire. Match the
// kind with errors.Is against the Err… values below; CodeOf gives the code of any error.
type Error struct {
	Code  Code
	Msg   string // what went wrong, without identities or data
	Cause error  // the underlying error, if any
	kind  *Error // the sentinel this error is an instance of (nil for a sentinel)
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("registry: %s: %v", e.Msg, e.Cause)
	}
	return "registry: " + e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Is matches an error against its sentinel.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && (t == e || t == e.kind)
}

// with returns an instance of sentinel e with a cause (and, when msg is not empty, a more
// precise message).
func (e *Error) with(msg string, cause error) *Error {
	if msg == "" {
		msg = e.Msg
	}
	return &Error{Code: e.Code, Msg: msg, Cause: cause, kind: e}
}

func sentinel(code Code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// Error kinds. Every error the registry returns matches exactly one of them (errors.Is),
// except context errors, which are returned as they are.
var (
	// ErrNotFound: no active namespace with that id for that owner — a missing namespace and
	// an owner mismatch are the same answer, so a caller learns nothing about other owners'
	// namespaces.
	ErrNotFound = sentinel(CodeNamespaceNotFound, "namespace not found")
	// ErrProtected: the update touches the protected `meta` root (see checkProtected);
	// nothing was written.
	ErrProtected = sentinel(CodeProtectedFieldMutation, "update touches protected field meta")
	// ErrApplyFailed: the update is malformed; nothing was written.
	ErrApplyFailed = sentinel(CodeApplyFailed, "update is malformed")
	// ErrInternal: a broken invariant (a document the registry cannot load or that failed
	// while applying, a store failure). After a failed live apply the namespace refuses
	// everything until its leases are released and it is loaded again.
	ErrInternal = sentinel(CodeInternalError, "internal error")
	// ErrDegraded: the store cannot currently save: the hub refuses peer updates, a peer
	// refuses local writes.
	ErrDegraded = sentinel(CodePersistenceDegraded, "persistence degraded")
	// ErrBootstrapFailed: a bootstrap import was refused — a malformed snapshot, a snapshot
	// without identity, or a namespace that already exists or is being imported.
	ErrBootstrapFailed = sentinel(CodeBootstrapFailed, "bootstrap import failed")
	// ErrIDMismatch: the replication id differs from the one expected.
	ErrIDMismatch = sentinel(CodeReplicationIDMismatch, "replication id mismatch")
	// ErrEpochMismatch: the replication epoch differs from the one expected.
	ErrEpochMismatch = sentinel(CodeReplicationEpochMismatch, "replication epoch mismatch")
	// ErrFenced: the session belongs to an epoch that was bumped. Its code is
	// REPLICATION_EPOCH_MISMATCH; the namespace layer answers it with IDENTITY_CHANGED.
	ErrFenced = sentinel(CodeReplicationEpochMismatch, "session fenced by an epoch bump")
	// ErrRoleViolation: an operation this side or this session may not perform (a
	// read-only session submitting, an epoch bump on a peer).
	ErrRoleViolation = sentinel(CodeRoleViolation, "operation not allowed for this role")
	// ErrClosed: the registry, lease or session is closed.
	ErrClosed = sentinel(CodeInternalError, "closed")
	// ErrOverloaded: the namespace's slot queue is full (overflow policy: refuse the newest
	// at once, nothing queued).
	ErrOverloaded = sentinel(CodeInternalError, "namespace sequencer queue full")
	// ErrInUse: the namespace is loaded (has leases) and cannot be reset or archived now.
	ErrInUse = sentinel(CodeInternalError, "namespace in use")
	// ErrExists: (hub) Recreate of a namespace the hub has (active or archived).
	ErrExists = sentinel(CodeInternalError, "namespace exists")
	// ErrSchemaInvalid: (peer) the replica's meta.schema could not be installed — it failed to
	// re-arm, or was invalid when the replica loaded — so no replication session opens on it
	// until a valid schema is installed or the replica is reset.
	ErrSchemaInvalid = sentinel(CodeInternalError, "the replica's schema is invalid")
	// ErrConflict: (hub cluster) another hub process changed the namespace's identity or
	// schema first — of two concurrent epoch bumps exactly one wins, the other gets this
	// error and nothing of it was written. Retry against the new state.
	ErrConflict = sentinel(CodeInternalError, "another hub node changed the namespace first")
	// ErrChanged: (hub) an epoch bump or schema replacement named the epoch or schema it
	// replaces (BumpEpochFrom, ReplaceSchemaFrom) and the namespace is no longer in it —
	// someone changed it since the caller read it. Nothing was written.
	ErrChanged = sentinel(CodeInternalError, "the namespace changed since the caller read it")
	// ErrDeleted: the namespace was deleted; its id is never used again. errors.Is(err,
	// ErrNotFound) is false: callers that answer both alike check both.
	ErrDeleted = sentinel(CodeNamespaceDeleted, "namespace deleted")
	// ErrNameTaken: (hub) the owner already gives that name to another namespace.
	ErrNameTaken = sentinel(CodeInternalError, "name taken")
	// ErrInvalid: (hub) a name or labels that break their rules (persistence.CheckEntryName,
	// persistence.CheckLabels).
	ErrInvalid = sentinel(CodeInternalError, "invalid name or labels")
)

// CodeOf returns the namespace error code of err: the Code of a registry *Error,
// INTERNAL_ERROR for anything else (including context errors).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternalError
}
