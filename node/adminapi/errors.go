package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
)

// Error codes of the admin API (README.md#admin-api). Registry outcomes keep the names of
// their namespace errors (docs/protocol.md#namespace-errors); the others name the HTTP-level
// condition.
const (
	CodeBadRequest        = "BAD_REQUEST"
	CodeUnauthorized      = "UNAUTHORIZED"
	CodeNotFound          = "NOT_FOUND"
	CodeMethodNotAllowed  = "METHOD_NOT_ALLOWED"
	CodeNamespaceNotFound = string(registry.CodeNamespaceNotFound)
	CodeApplyFailed       = string(registry.CodeApplyFailed)
	CodeProtected         = string(registry.CodeProtectedFieldMutation)
	CodeDegraded          = string(registry.CodePersistenceDegraded)
	CodeRoleViolation     = string(registry.CodeRoleViolation)
	CodeInternal          = string(registry.CodeInternalError)
	CodeUpdateTooLarge    = "UPDATE_TOO_LARGE"
	CodeConflicted        = "REPLICA_CONFLICTED" // a conflicted peer replica: reset it
	// CodeReplicaFailed: a write to a peer replica whose replication failed for a cause an
	// operator must remove (the message names it and the next step).
	CodeReplicaFailed = "REPLICA_FAILED"
	// CodeNotReplicated: a write to a peer's local replica that is not a replication target.
	CodeNotReplicated   = "NOT_REPLICATED"
	CodeNotBootstrapped = "NOT_BOOTSTRAPPED" // a peer target without a local replica yet
	CodeTargetConflict  = "TARGET_CONFLICT"
	CodeNamespaceInUse  = "NAMESPACE_IN_USE"
	CodeOverloaded      = "OVERLOADED"
	CodeUnavailable     = "UNAVAILABLE" // shutting down
	CodeTimeout         = "TIMEOUT"
	// CodeCursorExpired: a change-feed cursor the feed cannot resume after (older than it
	// keeps, or not one of its cursors); 410 with the list to start over with.
	CodeCursorExpired = "CURSOR_EXPIRED"
	// CodeVersionNotFound: no such version of the namespace.
	CodeVersionNotFound = "VERSION_NOT_FOUND"
	// CodeRestoreTooLarge: the change a restore needs is larger than the largest write.
	CodeRestoreTooLarge = "RESTORE_TOO_LARGE"
	CodeTooManyStreams  = "TOO_MANY_STREAMS"
	// CodeRequestTooLarge: a JSON body over its limit (an update over its limit is
	// UPDATE_TOO_LARGE).
	CodeRequestTooLarge = "REQUEST_TOO_LARGE"
	// CodeUnsupportedMediaType: a body that is not JSON where the route takes JSON.
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	// CodeEpochMismatch: an epoch bump whose expectedEpoch is not the namespace's epoch.
	CodeEpochMismatch = "EPOCH_MISMATCH"
	// CodeNamespaceDeleted: the namespace was deleted (404); CodeNameTaken: the owner
	// already has a namespace of that name (409).
	CodeNamespaceDeleted = "NAMESPACE_DELETED"
	CodeNameTaken        = "NAME_TAKEN"
	// CodeSchemaMismatch: a schema replacement whose expectedFingerprint is not the active
	// schema's.
	CodeSchemaMismatch = "SCHEMA_MISMATCH"
	// CodeRootType: ?root=NAME:TYPE names a type the root does not have.
	CodeRootType = "ROOT_TYPE_MISMATCH"
	// CodeConflict: in a hub cluster, another node changed the namespace first.
	CodeConflict = "CONFLICT"
	// CodeDocumentTooLarge: the document's JSON is larger than ?maxBytes= of GET …/doc.
	CodeDocumentTooLarge = "DOCUMENT_TOO_LARGE"
	// CodeCrossOrigin: a request that changes something, sent by a page of another origin.
	CodeCrossOrigin = "CROSS_ORIGIN"
	// CodeClientExists: POST /v1/clients for a name that has a valid client token.
	CodeClientExists = "CLIENT_EXISTS"
	// CodeHostNotAllowed: a request to a token-less API addressed to a name that is not
	// loopback.
	CodeHostNotAllowed = "HOST_NOT_ALLOWED"
	// CodeTokenRequired: a route served only by an API that requires an admin token (a
	// backup holds every namespace).
	CodeTokenRequired = "ADMIN_TOKEN_REQUIRED"
	// CodeNamespaceExists: a namespace to re-create from a replica exists already.
	CodeNamespaceExists = "NAMESPACE_EXISTS"
)

// Error is an admin API error: an HTTP status and the JSON body {"code","message"}.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func writeError(w http.ResponseWriter, e *Error) {
	b, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{e.Code, e.Message})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Status)
	w.Write(append(b, '\n'))
}

// fromErr classifies an error of the registry or the target controller.
func (a *API) fromErr(err error) *Error {
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return &Error{http.StatusNotFound, CodeNamespaceNotFound, "namespace not found"}
	case errors.Is(err, registry.ErrDeleted):
		return &Error{http.StatusNotFound, CodeNamespaceDeleted, "the namespace was deleted; its id is not used again"}
	case errors.Is(err, registry.ErrNameTaken):
		return &Error{http.StatusConflict, CodeNameTaken, err.Error() + ": choose another name, or rename the other namespace first"}
	case errors.Is(err, registry.ErrInvalid), errors.Is(err, persistence.ErrInvalid):
		return &Error{http.StatusBadRequest, CodeBadRequest, err.Error()}
	case errors.Is(err, registry.ErrProtected):
		return &Error{http.StatusConflict, CodeProtected, "the update touches the protected root meta; nothing was written"}
	case errors.Is(err, registry.ErrApplyFailed):
		return &Error{http.StatusBadRequest, CodeApplyFailed, err.Error()}
	case errors.Is(err, registry.ErrDegraded):
		return &Error{http.StatusServiceUnavailable, CodeDegraded, "persistence is degraded; writes are refused until the store commits again"}
	case errors.Is(err, persistence.ErrUnavailable):
		// The store itself (a namespace's entry read before the registry is asked) cannot
		// answer now: a hub cluster node without quorum.
		return &Error{http.StatusServiceUnavailable, CodeDegraded, "the store cannot be reached now (a hub cluster node without quorum); retry later"}
	case errors.Is(err, registry.ErrOverloaded):
		return &Error{http.StatusServiceUnavailable, CodeOverloaded, "the namespace's write queue is full; retry later"}
	case errors.Is(err, registry.ErrRoleViolation):
		return &Error{http.StatusForbidden, CodeRoleViolation, err.Error()}
	case errors.Is(err, registry.ErrConflict):
		return &Error{http.StatusConflict, CodeConflict, "another hub node changed this namespace's identity or schema first; nothing was written: retry"}
	case errors.Is(err, registry.ErrExists):
		return &Error{http.StatusConflict, CodeNamespaceExists, "the hub has this namespace (active or archived): nothing was overwritten"}
	case errors.Is(err, registry.ErrInUse):
		return &Error{http.StatusConflict, CodeNamespaceInUse, "the namespace is in use"}
	case errors.Is(err, registry.ErrClosed):
		return &Error{http.StatusServiceUnavailable, CodeUnavailable, "shutting down"}
	case errors.Is(err, namespace.ErrTargetConflict):
		return &Error{http.StatusConflict, CodeTargetConflict, "the namespace is already a target with another owner"}
	case errors.Is(err, namespace.ErrUnknownTarget):
		return &Error{http.StatusNotFound, CodeNamespaceNotFound, "no such replication target"}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{http.StatusGatewayTimeout, CodeTimeout, "the operation did not finish in time"}
	case errors.Is(err, context.Canceled):
		return &Error{http.StatusServiceUnavailable, CodeUnavailable, "the request was cancelled"}
	}
	a.log.Error("admin request failed", errAttr(err))
	return &Error{http.StatusInternalServerError, CodeInternal, "internal error"}
}

func errAttr(err error) slog.Attr { return slog.String("error", err.Error()) }
