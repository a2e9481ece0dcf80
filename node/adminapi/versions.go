package adminapi

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/versions"
	"github.com/nomicore/nomicore/yjs"
)

// VersionJSON is a version as the API shows it.
type VersionJSON struct {
	VersionID   string `json:"versionId"`
	Label       string `json:"label"`
	Kind        string `json:"kind"` // manual, auto or before-restore
	CreatedAt   string `json:"createdAt"`
	StateVector string `json:"stateVector"` // hex
	StateBytes  int    `json:"stateBytes"`  // the size of its encoded state
}

func versionOf(v persistence.Version) VersionJSON {
	return VersionJSON{VersionID: strconv.FormatUint(v.ID, 10), Label: v.Label, Kind: v.Kind.String(),
		CreatedAt: v.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"), StateVector: hex.EncodeToString(v.StateVector),
		StateBytes: v.StateBytes}
}

// versionErr classifies an error of the versions service.
func (a *API) versionErr(err error) *Error {
	switch {
	case errors.Is(err, versions.ErrNotFound):
		return &Error{http.StatusNotFound, CodeVersionNotFound, "no such version of this namespace (GET …/versions lists them)"}
	case errors.Is(err, versions.ErrTooLarge):
		return &Error{http.StatusRequestEntityTooLarge, CodeRestoreTooLarge, err.Error() +
			": raise --max-chunked-update-bytes on the hub and its peers, or restore in steps (restore a version closer to the current document first)"}
	case errors.Is(err, persistence.ErrInvalid):
		return &Error{http.StatusBadRequest, CodeBadRequest, err.Error()}
	}
	return a.fromErr(err)
}

// pathVersion returns the route's {v}.
func pathVersion(r *http.Request) (uint64, *Error) {
	v, err := strconv.ParseUint(r.PathValue("v"), 10, 64)
	if err != nil || v == 0 {
		return 0, &Error{http.StatusBadRequest, CodeBadRequest, "a version id is a whole number from 1 (the versionId GET …/versions lists)"}
	}
	return v, nil
}

// POST /v1/namespaces/{id}/versions, body {"label"} (optional): takes a version of the
// current document; 201 with it.
func (a *API) createVersion(w http.ResponseWriter, r *http.Request) {
	ns, e := a.lookup(r)
	if e != nil {
		writeError(w, e)
		return
	}
	var body struct {
		Label string `json:"label"`
	}
	if e := readJSON(r, &body); e != nil {
		writeError(w, e)
		return
	}
	if len(body.Label) > persistence.MaxVersionLabelBytes {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("a label is at most %d bytes", persistence.MaxVersionLabelBytes)})
		return
	}
	v, err := a.opts.Versions.Take(r.Context(), ns.owner, ns.id, body.Label, persistence.VersionManual)
	if err != nil {
		writeError(w, a.versionErr(err))
		return
	}
	a.audit(r, "version-created", slog.String("namespaceId", ns.id), slog.Uint64("versionId", v.ID))
	writeJSON(w, http.StatusCreated, versionOf(v))
}

// GET /v1/namespaces/{id}/versions: the namespace's versions, oldest first.
func (a *API) listVersions(w http.ResponseWriter, r *http.Request) {
	ns, e := a.lookup(r)
	if e != nil {
		writeError(w, e)
		return
	}
	list, err := a.opts.Versions.List(r.Context(), ns.id)
	if err != nil {
		writeError(w, a.versionErr(err))
		return
	}
	out := struct {
		Versions []VersionJSON `json:"versions"`
	}{Versions: make([]VersionJSON, 0, len(list))}
	for _, v := range list {
		out.Versions = append(out.Versions, versionOf(v))
	}
	writeJSON(w, http.StatusOK, out)
}

// versionState resolves {id} and {v} and reads the version's state.
func (a *API) versionState(w http.ResponseWriter, r *http.Request) (requestedNamespace, persistence.Version, []byte, bool) {
	ns, e := a.lookup(r)
	if e == nil {
		var id uint64
		if id, e = pathVersion(r); e == nil {
			v, state, err := a.opts.Versions.State(r.Context(), ns.id, id)
			if err == nil {
				return ns, v, state, true
			}
			e = a.versionErr(err)
		}
	}
	writeError(w, e)
	return ns, persistence.Version{}, nil, false
}

// GET /v1/namespaces/{id}/versions/{v}: one version.
func (a *API) getVersion(w http.ResponseWriter, r *http.Request) {
	if _, v, _, ok := a.versionState(w, r); ok {
		writeJSON(w, http.StatusOK, versionOf(v))
	}
}

// GET /v1/namespaces/{id}/versions/{v}/doc: the document as of the version, as JSON, with
// the rules of GET …/doc (?root=, ?maxBytes=).
func (a *API) getVersionDoc(w http.ResponseWriter, r *http.Request) {
	roots, err := parseRoots(r.URL.Query()["root"])
	if err != nil {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, err.Error()})
		return
	}
	maxBytes := 0
	if r.URL.Query().Has("maxBytes") {
		var e *Error
		if maxBytes, e = intParam(r, "maxBytes", 0, MaxDocMaxBytes); e != nil {
			writeError(w, e)
			return
		}
	}
	_, _, state, ok := a.versionState(w, r)
	if !ok {
		return
	}
	doc, err := registry.RenderJSON(state, roots...)
	var rk *registry.RootKindError
	switch {
	case errors.As(err, &rk):
		writeError(w, &Error{http.StatusBadRequest, CodeRootType, fmt.Sprintf("%v: ask for ?root=%s:%s", rk, rk.Name, rk.Has)})
		return
	case err != nil:
		writeError(w, a.fromErr(err))
		return
	}
	if maxBytes > 0 {
		writeDocJSONAtMost(w, doc, maxBytes)
		return
	}
	writeDocJSON(w, http.StatusOK, doc)
}

// GET /v1/namespaces/{id}/versions/{v}/update: the version's state as one Yjs update
// (application/octet-stream); ?sv=HEX only what that state vector lacks.
func (a *API) getVersionUpdate(w http.ResponseWriter, r *http.Request) {
	var sv []byte
	if s := r.URL.Query().Get("sv"); s != "" {
		var err error
		if sv, err = hex.DecodeString(s); err != nil {
			writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "?sv= must be hex"})
			return
		}
	}
	_, _, state, ok := a.versionState(w, r)
	if !ok {
		return
	}
	if sv != nil {
		diff, err := yjs.DiffUpdate(state, sv)
		if err != nil {
			writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "?sv= is not a state vector: " + err.Error()})
			return
		}
		state = diff
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(state)))
	w.WriteHeader(http.StatusOK)
	w.Write(state)
}

// RestoreJSON is the answer of a restore.
type RestoreJSON struct {
	Restored VersionJSON `json:"restored"`
	// Changed is false when the document held what the version holds already (nothing
	// was written).
	Changed bool `json:"changed"`
	// Before is the version taken just before the restore: restoring it undoes this one.
	Before      *VersionJSON `json:"before,omitempty"`
	StateVector string       `json:"stateVector"` // the document's, after the restore
	UpdateBytes int          `json:"updateBytes"` // the size of the change written
}

// POST /v1/namespaces/{id}/versions/{v}/restore: makes the document equal to the version,
// as a new change that replicates like any write; 200 once it is applied and durable.
func (a *API) restoreVersion(w http.ResponseWriter, r *http.Request) {
	ns, e := a.lookup(r)
	if e != nil {
		writeError(w, e)
		return
	}
	id, e := pathVersion(r)
	if e != nil {
		writeError(w, e)
		return
	}
	res, err := a.opts.Versions.Restore(r.Context(), ns.owner, ns.id, id)
	if err != nil {
		writeError(w, a.versionErr(err))
		return
	}
	out := RestoreJSON{Restored: versionOf(res.Version), Changed: res.Changed, StateVector: hex.EncodeToString(res.StateVector), UpdateBytes: res.UpdateBytes}
	attrs := []slog.Attr{slog.String("namespaceId", ns.id), slog.Uint64("versionId", id), slog.Bool("changed", res.Changed)}
	if res.Changed {
		b := versionOf(res.Before)
		out.Before = &b
		attrs = append(attrs, slog.Uint64("beforeVersionId", res.Before.ID))
	}
	a.audit(r, "version-restored", attrs...)
	writeJSON(w, http.StatusOK, out)
}

// noVersions answers the version routes of a hub that keeps no versions.
func (a *API) noVersions(w http.ResponseWriter, _ *http.Request) {
	writeError(w, &Error{http.StatusNotFound, CodeNotFound, "this hub keeps no versions"})
}

// feedRoutes adds the change feed's and the versions' routes (hub), when configured.
func (a *API) feedRoutes(m *http.ServeMux) {
	if a.opts.Changes != nil {
		m.HandleFunc("GET /v1/changes", a.getChanges)
		m.HandleFunc("GET /v1/changes/latest", a.getLatestChanges)
		m.HandleFunc("GET /v1/webhooks", a.getWebhooks)
	}
	if a.opts.Versions == nil {
		// Say why rather than a bare 404.
		m.HandleFunc("/v1/namespaces/{id}/versions/", a.noVersions)
		m.HandleFunc("/v1/namespaces/{id}/versions", a.noVersions)
		return
	}
	m.HandleFunc("POST /v1/namespaces/{id}/versions", a.createVersion)
	m.HandleFunc("GET /v1/namespaces/{id}/versions", a.listVersions)
	m.HandleFunc("GET /v1/namespaces/{id}/versions/{v}", a.getVersion)
	m.HandleFunc("GET /v1/namespaces/{id}/versions/{v}/doc", a.getVersionDoc)
	m.HandleFunc("GET /v1/namespaces/{id}/versions/{v}/update", a.getVersionUpdate)
	m.HandleFunc("POST /v1/namespaces/{id}/versions/{v}/restore", a.restoreVersion)
}
