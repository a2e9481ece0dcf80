package adminapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
)

// The routes of a namespace's life on the hub beyond creation: listing by owner, name and
// label a page at a time, renaming and relabelling, deleting (README.md#admin-api).

// pagedQuery reports whether GET /v1/namespaces asks for a page: any of owner, name,
// label, after, limit. Without them it answers every namespace at once, as it always did.
func pagedQuery(r *http.Request) bool {
	q := r.URL.Query()
	for _, k := range []string{"owner", "name", "label", "after", "limit"} {
		if q.Has(k) {
			return true
		}
	}
	return false
}

// NextHeader carries the cursor of the next page of GET /v1/namespaces (absent on the last).
const NextHeader = "Nomicore-Next-After"

// GET /v1/namespaces?owner=&name=&label=k=v&after=&limit= (hub): one page of the namespaces
// that match every filter given (label repeatable), in namespace id order, read through
// the catalog's indexes. The body is the JSON array of their statuses; the header
// Nomicore-Next-After (and a Link rel="next") gives the after= of the next page.
func (a *API) listPage(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := persistence.EntryQuery{Owner: v.Get("owner"), Name: v.Get("name"), After: v.Get("after")}
	if q.Owner != "" {
		if e := checkOwner(q.Owner); e != nil {
			writeError(w, e)
			return
		}
	}
	if v.Has("limit") {
		n, e := intParam(r, "limit", 1, persistence.MaxListLimit)
		if e != nil {
			writeError(w, e)
			return
		}
		q.Limit = n
	}
	for _, l := range v["label"] {
		k, val, ok := strings.Cut(l, "=")
		if !ok || persistence.CheckLabelKey(k) != nil {
			writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("label=%q: give label=KEY=VALUE, the key of letters, digits and . _ / -", l)})
			return
		}
		if q.Labels == nil {
			q.Labels = map[string]string{}
		}
		q.Labels[k] = val
	}
	page, err := a.opts.Store.ListEntries(r.Context(), q)
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	out := make([]Status, 0, len(page.Entries))
	for _, e := range page.Entries {
		st := Status{NamespaceID: e.NamespaceID, Owner: e.Owner, State: StateActive, Name: e.Name, Labels: e.Labels}
		if e.State == persistence.StateArchived {
			st.State = StateArchived
		}
		out = append(out, st)
	}
	if page.Next != "" {
		w.Header().Set(NextHeader, page.Next)
		next := url.Values{}
		for k, vs := range v {
			if k != "after" {
				next[k] = vs
			}
		}
		next.Set("after", page.Next)
		w.Header().Set("Link", "</v1/namespaces?"+next.Encode()+`>; rel="next"`)
	}
	writeJSON(w, http.StatusOK, out)
}

// PatchRequest is the body of PATCH /v1/namespaces/{id}: the fields given are changed.
type PatchRequest struct {
	// Name is the new name ("" removes it); absent keeps it.
	Name *string `json:"name"`
	// Labels replace every label ({} removes them); absent keeps them.
	Labels *map[string]string `json:"labels"`
}

// PATCH /v1/namespaces/{id} (hub): change the name and labels. They replicate to the
// peers with the document (its meta map). 409 NAME_TAKEN when the owner already has a
// namespace of that name. Answers the namespace's status.
func (a *API) patchNamespace(w http.ResponseWriter, r *http.Request) {
	var req PatchRequest
	if e := readJSON(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Name == nil && req.Labels == nil {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, `nothing to change: give "name", "labels" or both`})
		return
	}
	ns, e := a.lookup(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if ns.archived {
		writeError(w, &Error{http.StatusNotFound, CodeNamespaceNotFound, "namespace is archived"})
		return
	}
	ent, err := a.opts.Registry.Relabel(r.Context(), ns.owner, ns.id, persistence.EntryChange{Name: req.Name, Labels: req.Labels})
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	a.audit(r, "namespace-relabelled", slog.String("namespaceId", ns.id), slog.String("name", ent.Name), slog.Int("labels", len(ent.Labels)))
	writeJSON(w, http.StatusOK, Status{NamespaceID: ns.id, Owner: ent.Owner, State: StateActive, Name: ent.Name, Labels: ent.Labels})
}

// DELETE /v1/namespaces/{id}?expectedEpoch=N (hub): delete the namespace everywhere
// (docs/operations.md#deleting-a-namespace). N must be the replicationEpoch GET
// /v1/namespaces/{id} shows: a delete is never one stray request (400 without it), and of
// an epoch bump and a delete racing one gets 409 EPOCH_MISMATCH. Editors are closed, peers
// told (they delete their replicas), the document and its versions removed and the id
// never used again: later requests are 404 NAMESPACE_DELETED. The change feed's "deleted"
// change is written by the delete itself (with the tombstone on a single hub, as the
// deletion record of the log in a cluster), not after it. Answers 204.
func (a *API) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	raw := r.URL.Query().Get("expectedEpoch")
	if raw == "" {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "deleting a namespace removes it from the hub, the cluster and every peer, " +
			"and cannot be undone: confirm it with ?expectedEpoch=N, N being the replicationEpoch GET /v1/namespaces/{id} shows"})
		return
	}
	expected, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || expected == 0 {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "expectedEpoch must be a whole number from 1"})
		return
	}
	ns, e := a.lookup(r)
	if e != nil {
		if e.Code == CodeNamespaceDeleted {
			a.finishDelete(r, expected)
		}
		writeError(w, e)
		return
	}
	err = a.opts.Registry.Delete(r.Context(), ns.owner, ns.id, expected)
	if errors.Is(err, registry.ErrChanged) {
		writeError(w, &Error{http.StatusConflict, CodeEpochMismatch, fmt.Sprintf("the namespace's epoch is not %d: nothing was deleted; "+
			"check GET /v1/namespaces/%s and confirm with the epoch it shows", expected, ns.id)})
		return
	}
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	attrs := []slog.Attr{slog.String("namespaceId", ns.id), slog.Uint64("replicationEpoch", expected)}
	if ns.name != "" {
		attrs = append(attrs, slog.String("name", ns.name))
	}
	a.audit(r, "namespace-deleted", attrs...)
	w.WriteHeader(http.StatusNoContent)
}

// finishDelete hands a delete of a namespace deleted already to the registry, which answers
// it deleted — and, in a hub cluster, completes a delete that was interrupted half-way
// (registry.DeleteFinisher). The request is answered 404 NAMESPACE_DELETED all the same.
func (a *API) finishDelete(r *http.Request, expected uint64) {
	id, bad := pathID(r)
	if bad != nil {
		return
	}
	if e, err := a.opts.Store.Entry(r.Context(), id); err == nil && e.State == persistence.StateDeleted {
		_ = a.opts.Registry.Delete(r.Context(), e.Owner, id, expected) // ErrDeleted: the answer is 404 either way
	}
}
