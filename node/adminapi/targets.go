package adminapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
)

// TargetJSON is a replication target as the peer's admin API shows it.
type TargetJSON struct {
	NamespaceID      string `json:"namespaceId"`
	Owner            string `json:"owner"`
	State            string `json:"state"`
	ReplicationID    string `json:"replicationId,omitempty"`
	ReplicationEpoch uint64 `json:"replicationEpoch,omitempty"`
	// SchemaRearmFailed: the replicated schema failed to re-arm and the namespace was
	// closed until the target is reset or removed and added back.
	SchemaRearmFailed bool `json:"schemaRearmFailed,omitempty"`
	// Code is the error code that ended the target's replication (failed, conflicted), as
	// the hub or this peer sent it: NAMESPACE_NOT_FOUND, NAMESPACE_UNAUTHORIZED, …
	Code string `json:"code,omitempty"`
	// Reason says, in words, why the target is not replicating and what to do — also when
	// it waits for a connection the hub refused.
	Reason string `json:"reason,omitempty"`
	// Progress is the snapshot, catch-up difference or live update being received from the
	// hub in chunks, while one is.
	Progress *ProgressJSON `json:"progress,omitempty"`
	// Retry says how a target that failed recovers, from its failure until it is live again
	// (also while an attempt is under way).
	Retry *RetryJSON `json:"retry,omitempty"`
	// UnreplicatedBytes counts the bytes of local writes (admin API, editors) this peer took
	// since it started that the hub has not confirmed yet.
	UnreplicatedBytes int64 `json:"unreplicatedBytes,omitempty"`
}

// RetryJSON is how a failed target recovers.
type RetryJSON struct {
	// Recovery is automatic (it heals by itself: retried with backoff), after-config (an
	// operator must change something; retried slowly and on every new connection) or none
	// (not retried by itself: see the reason).
	Recovery string `json:"recovery"`
	// Attempts counts the failures in a row.
	Attempts int `json:"attempts"`
	// At is when the next attempt is made, while the target is failed (absent with recovery
	// none, and while an attempt is under way); a time in the past means at the next
	// connection to the hub.
	At *time.Time `json:"at,omitempty"`
}

func retryJSON(t namespace.TargetStatus) *RetryJSON {
	f := t.Failure
	if f == nil {
		return nil
	}
	out := &RetryJSON{Recovery: string(f.Recovery), Attempts: f.Attempts}
	if !f.RetryAt.IsZero() && t.State == observer.ChannelFailed {
		out.At = timePtr(f.RetryAt)
	}
	return out
}

func (a *API) targetJSON(t namespace.TargetStatus) TargetJSON {
	out := TargetJSON{NamespaceID: t.NamespaceID, Owner: t.Owner, State: string(t.State), SchemaRearmFailed: t.SchemaFailed,
		Progress: progressJSON(t.Progress), Retry: retryJSON(t), UnreplicatedBytes: t.UnreplicatedBytes}
	if t.Identity.Valid() {
		out.ReplicationID, out.ReplicationEpoch = t.Identity.ReplicationID, t.Identity.Epoch
	}
	if a.opts.ExplainTarget != nil {
		out.Code, out.Reason = a.opts.ExplainTarget(t)
	}
	return out
}

// GET /v1/targets (peer)
func (a *API) listTargets(w http.ResponseWriter, r *http.Request) {
	out := []TargetJSON{}
	for _, t := range a.opts.Targets.Targets() {
		out = append(out, a.targetJSON(t))
	}
	writeJSON(w, http.StatusOK, out)
}

// TargetRequest is the body of POST /v1/targets.
type TargetRequest struct {
	NamespaceID string `json:"namespaceId"`
	Owner       string `json:"owner"`
}

// POST /v1/targets (peer): 201 for a new target, 200 when it already was one.
func (a *API) addTarget(w http.ResponseWriter, r *http.Request) {
	req := TargetRequest{Owner: "default"}
	if e := readJSON(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if !registry.ValidNamespaceID(req.NamespaceID) {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "namespaceId must be ns- and 32 lowercase hex digits"})
		return
	}
	if e := checkOwner(req.Owner); e != nil {
		writeError(w, e)
		return
	}
	created, err := a.opts.Targets.AddTarget(r.Context(), namespace.Target{NamespaceID: req.NamespaceID, Owner: req.Owner})
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	t, ok := a.opts.Targets.Target(req.NamespaceID)
	if !ok { // removed meanwhile
		t = namespace.TargetStatus{Target: namespace.Target{NamespaceID: req.NamespaceID, Owner: req.Owner}, State: observer.ChannelClosed}
	}
	if created {
		a.audit(r, "target-added", slog.String("namespaceId", req.NamespaceID))
	}
	w.Header().Set("Location", "/v1/namespaces/"+req.NamespaceID)
	writeJSON(w, status, a.targetJSON(t))
}

// DELETE /v1/targets/{id} (peer)
func (a *API) removeTarget(w http.ResponseWriter, r *http.Request) {
	id, e := pathID(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if err := a.opts.Targets.RemoveTarget(r.Context(), id); err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	a.audit(r, "target-removed", slog.String("namespaceId", id))
	w.WriteHeader(http.StatusNoContent)
}

// POST /v1/namespaces/{id}/reset (peer): archive the local replica and bootstrap again
// (the way out of conflicted: docs/protocol.md#peer-namespace-states).
func (a *API) reset(w http.ResponseWriter, r *http.Request) {
	id, e := pathID(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if _, ok := a.opts.Targets.Target(id); !ok {
		writeError(w, &Error{http.StatusNotFound, CodeNamespaceNotFound, "no such replication target"})
		return
	}
	a.unload(r.Context(), id) // the registry resets only an unloaded replica
	if err := a.opts.Targets.Reset(r.Context(), id); err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	a.audit(r, "replica-reset", slog.String("namespaceId", id))
	t, _ := a.opts.Targets.Target(id)
	writeJSON(w, http.StatusOK, a.targetJSON(t))
}
