package adminapi

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
)

// DefaultMaxRecreateBytes bounds the body of POST /v1/namespaces/{id}/recreate when
// Options.MaxRecreateBytes is zero.
const DefaultMaxRecreateBytes = 32 << 20

// recreate is POST /v1/namespaces/{id}/recreate?owner=OWNER (hub): the namespace {id}, which
// this hub does not have, is created again from the body — a replica's whole state, as the
// peer that holds it answers GET /v1/namespaces/{id}/update — with its id and identity. It
// is how a hub restored from a backup older than a namespace gets that namespace back from
// its peers: they reconcile with it and what they wrote flows back. 201 with the identity;
// 409 NAMESPACE_EXISTS when the hub has it (nothing is overwritten); 400 APPLY_FAILED for a
// body that is not a replica's whole state. Audited ("namespace-recreated").
func (a *API) recreate(w http.ResponseWriter, r *http.Request) {
	id, e := pathID(r)
	if e != nil {
		writeError(w, e)
		return
	}
	owner := r.URL.Query().Get("owner")
	if owner == "" {
		owner = "default"
	}
	if e := checkOwner(owner); e != nil {
		writeError(w, e)
		return
	}
	limit := a.opts.MaxRecreateBytes
	if limit <= 0 {
		limit = DefaultMaxRecreateBytes
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "reading the body: " + err.Error()})
		return
	}
	if len(body) > limit {
		writeError(w, &Error{http.StatusRequestEntityTooLarge, CodeUpdateTooLarge,
			fmt.Sprintf("the state exceeds %d bytes, the largest document a replica can receive (--max-chunked-bootstrap-bytes)", limit)})
		return
	}
	if len(body) == 0 {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "the body must be the namespace's whole state, as a peer's " +
			"GET /v1/namespaces/" + id + "/update answers it"})
		return
	}
	ident, err := a.opts.Registry.Recreate(r.Context(), owner, id, body)
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	a.audit(r, "namespace-recreated", slog.String("namespaceId", id), slog.Uint64("replicationEpoch", ident.Epoch), slog.Int("bytes", len(body)))
	w.Header().Set("Location", "/v1/namespaces/"+id)
	writeJSON(w, http.StatusCreated, Created{id, ident.ReplicationID, ident.Epoch})
}
