package adminapi

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/yjs"
)

// Hub namespace states in the admin API (README.md#admin-api).
const (
	StateActive   = "active"
	StateArchived = "archived"
)

// requestedNamespace is a namespace the request names: its owner and, on a peer, its target.
type requestedNamespace struct {
	id       string
	owner    string
	name     string // hub: the namespace's name, if it has one
	archived bool
	target   *namespace.TargetStatus // peer: the target serving it, if any
}

// lookup resolves {id}: a hub entry, or a peer target (else a local replica kept from a
// removed target).
func (a *API) lookup(r *http.Request) (requestedNamespace, *Error) {
	id, bad := pathID(r)
	if bad != nil {
		return requestedNamespace{}, bad
	}
	return a.lookupID(r.Context(), id)
}

// lookupID is lookup of a valid namespace id.
func (a *API) lookupID(ctx context.Context, id string) (requestedNamespace, *Error) {
	if a.opts.Side == observer.SidePeer {
		if t, ok := a.opts.Targets.Target(id); ok {
			return requestedNamespace{id: id, owner: t.Owner, target: &t}, nil
		}
	}
	e, err := a.opts.Store.Entry(ctx, id)
	if errors.Is(err, persistence.ErrNotFound) {
		return requestedNamespace{}, &Error{http.StatusNotFound, CodeNamespaceNotFound, "namespace not found"}
	}
	if err == nil && e.State == persistence.StateDeleted {
		return requestedNamespace{}, a.fromErr(registry.ErrDeleted)
	}
	if err != nil {
		return requestedNamespace{}, a.fromErr(err)
	}
	return requestedNamespace{id: id, owner: e.Owner, name: e.Name, archived: e.State == persistence.StateArchived}, nil
}

// open takes a lease on the namespace for the request; give it back with a.release.
func (a *API) open(r *http.Request, ns requestedNamespace) (*registry.Lease, *Error) {
	if ns.archived {
		return nil, &Error{http.StatusNotFound, CodeNamespaceNotFound, "namespace is archived"}
	}
	l, err := a.leases.open(r.Context(), ns.owner, ns.id)
	if errors.Is(err, registry.ErrNotFound) && ns.target != nil {
		return nil, &Error{http.StatusServiceUnavailable, CodeNotBootstrapped,
			"the replica is not bootstrapped yet (target state " + string(ns.target.State) + ")"}
	}
	if err != nil {
		return nil, a.fromErr(err)
	}
	return l, nil
}

// release gives a request's lease back.
func (a *API) release(l *registry.Lease) {
	a.leases.done(l.NamespaceID(), l)
	l.Release()
}

// lookupOpen is lookup then open.
func (a *API) lookupOpen(w http.ResponseWriter, r *http.Request) (requestedNamespace, *registry.Lease, bool) {
	ns, e := a.lookup(r)
	if e == nil {
		var l *registry.Lease
		if l, e = a.open(r, ns); e == nil {
			return ns, l, true
		}
	}
	writeError(w, e)
	return ns, nil, false
}

// Status is a namespace status object (README.md#admin-api), with what the process knows of
// the namespace's activity.
type Status struct {
	NamespaceID      string `json:"namespaceId"`
	Owner            string `json:"owner,omitempty"`
	ReplicationID    string `json:"replicationId,omitempty"`
	ReplicationEpoch uint64 `json:"replicationEpoch,omitempty"`
	StateVector      string `json:"stateVector,omitempty"`
	// State: on the hub active or archived; on a peer the replication state of its target
	// (targeted, opening, live, conflicted, failed, …; a local replica that is no longer a
	// target is closed).
	State string `json:"state"`
	// Name and Labels: on the hub from its catalog, on a peer as the hub replicated them.
	Name     string            `json:"name,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Sessions []SessionStatus   `json:"sessions,omitempty"`
	Loaded   *bool             `json:"loaded,omitempty"` // hub list: a runtime holds it now
	// Schema is the namespace's active schema, if it has one.
	Schema *SchemaJSON `json:"schema,omitempty"`
	// DocumentBytes is the document's size as one Yjs update, when it was measured (it is
	// measured again, at most every few seconds, while it changes and someone asks).
	DocumentBytes *int `json:"documentBytes,omitempty"`
	// Writes, WriteBytes and LastWriteAt: the transactions that changed the document since
	// the process started (GET /v1/namespaces/{id}; GET /v1/namespaces leaves them out).
	Writes      *uint64    `json:"writes,omitempty"`
	WriteBytes  *uint64    `json:"writeBytes,omitempty"`
	LastWriteAt *time.Time `json:"lastWriteAt,omitempty"`
	TargetFacts
	// EditorList names the editors connected to the namespace on this node (GET
	// /v1/namespaces/{id}, on a node with a client listener): who, never a token.
	EditorList []EditorJSON `json:"editorList,omitempty"`
	// Presence lists the editors present in the namespace across the system as this node
	// sees them (the awareness states it holds: its own editors' and, with the presence
	// relay, those of other nodes), on a node with a client listener and editors of it.
	Presence []PresenceJSON `json:"presence,omitempty"`
	// Log (a node of a hub cluster that has the namespace loaded) is how far behind the
	// cluster's log of the namespace this node is.
	Log *LogJSON `json:"log,omitempty"`
}

// PresenceJSON is one editor present in a namespace: the name its awareness state gives
// (user.name, when it gives one), its Yjs client id, the client token or credential that
// connected it (on this node only), the node it is attached to, and when its state last
// changed.
type PresenceJSON struct {
	User      string    `json:"user,omitempty"`
	ClientID  uint64    `json:"clientId"`
	Client    string    `json:"client,omitempty"`
	Node      string    `json:"node"`
	Local     bool      `json:"local"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// LogJSON is how a node of a hub cluster follows a namespace's log: the records it has not
// applied yet, as of the last delivery, and whether it is compacting the log now.
type LogJSON struct {
	LagRecords uint64 `json:"lagRecords"`
	Compacting bool   `json:"compacting"`
}

// ProgressJSON is an inbound chunked transfer in progress: the bytes received so far of
// totalBytes; kind is snapshot (a bootstrap), sync-diff (a catch-up) or update.
type ProgressJSON struct {
	BytesReceived int    `json:"bytesReceived"`
	TotalBytes    int    `json:"totalBytes"`
	Kind          string `json:"kind"`
}

// progressJSON renders a target's transfer in progress, nil when there is none.
func progressJSON(p *namespace.TransferProgress) *ProgressJSON {
	if p == nil {
		return nil
	}
	kind := p.Kind.String()
	if p.Kind == protocol.KindLiveUpdate {
		kind = "update"
	}
	return &ProgressJSON{BytesReceived: p.BytesReceived, TotalBytes: p.TotalBytes, Kind: kind}
}

// SchemaJSON is an active schema as the admin API shows it: its semantic fingerprint and
// the replicated updatedAt (never the definition itself; read it from the document).
type SchemaJSON struct {
	SemanticFingerprint string `json:"semanticFingerprint"`
	UpdatedAt           string `json:"updatedAt,omitempty"`
}

func schemaJSON(l *registry.Lease) *SchemaJSON {
	s, ok := l.ActiveSchema()
	if !ok {
		return nil
	}
	return &SchemaJSON{SemanticFingerprint: s.Fingerprint, UpdatedAt: s.UpdatedAt}
}

// SessionStatus is a peer's channel on a hub namespace, with what its connection knows of
// the namespace's live updates on it (GET /v1/namespaces/{id} only): UPDATEs sent since the
// namespace opened on the connection, those acknowledged, those awaiting their
// acknowledgement, and those queued.
type SessionStatus struct {
	PeerInstanceID  string  `json:"peerInstanceId"`
	ConnectionID    string  `json:"connectionId,omitempty"`
	State           string  `json:"state"`
	UpdatesSent     *uint64 `json:"updatesSent,omitempty"`
	UpdatesAcked    *uint64 `json:"updatesAcked,omitempty"`
	InFlightUpdates *int    `json:"inFlightUpdates,omitempty"`
	QueuedUpdates   *int    `json:"queuedUpdates,omitempty"`
	QueuedBytes     *int    `json:"queuedBytes,omitempty"`
}

func (a *API) hubSessions(id string) []SessionStatus {
	out := []SessionStatus{}
	if a.opts.Sessions == nil {
		return out
	}
	for _, s := range a.opts.Sessions(id) {
		out = append(out, SessionStatus{PeerInstanceID: s.PeerInstanceID, ConnectionID: s.ConnectionID, State: string(s.State)})
	}
	return out
}

// FlowsTimeout bounds how long GET /v1/namespaces/{id} waits for the connections to say
// what they know of the namespace's live updates.
const FlowsTimeout = 2 * time.Second

// addFlows adds to each session what its connection knows of the namespace's updates.
func (a *API) addFlows(ctx context.Context, id string, sessions []SessionStatus) {
	if a.opts.Flows == nil || len(sessions) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, FlowsTimeout)
	defer cancel()
	byConn := map[string]ws.Flow{}
	for _, f := range a.opts.Flows(ctx, id) {
		byConn[f.ConnectionID] = f
	}
	for i := range sessions {
		f, ok := byConn[sessions[i].ConnectionID]
		if !ok {
			continue
		}
		s := &sessions[i]
		s.UpdatesSent, s.UpdatesAcked, s.InFlightUpdates = &f.UpdatesSent, &f.UpdatesAcked, &f.InFlight
		s.QueuedUpdates, s.QueuedBytes = &f.QueuedUpdates, &f.QueuedBytes
	}
}

// GET /v1/namespaces: the namespaces without loading their documents (identity and state
// vector are in GET /v1/namespaces/{id}); on a peer every target and every local replica.
func (a *API) listNamespaces(w http.ResponseWriter, r *http.Request) {
	if a.opts.Side == observer.SideHub && pagedQuery(r) {
		a.listPage(w, r)
		return
	}
	entries, err := a.opts.Registry.Entries(r.Context(), "")
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	out := []Status{}
	if a.opts.Side == observer.SideHub {
		for _, e := range entries {
			loaded := e.Loaded
			st := Status{NamespaceID: e.NamespaceID, Owner: e.Owner, State: StateActive, Loaded: &loaded}
			if e.Archived {
				st.State = StateArchived
			}
			out = append(out, st)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	seen := map[string]bool{}
	for _, t := range a.opts.Targets.Targets() {
		seen[t.NamespaceID] = true
		st := Status{NamespaceID: t.NamespaceID, Owner: t.Owner, State: string(t.State)}
		if t.Identity.Valid() {
			st.ReplicationID, st.ReplicationEpoch = t.Identity.ReplicationID, t.Identity.Epoch
		}
		out = append(out, st)
	}
	for _, e := range entries {
		if !seen[e.NamespaceID] && !e.Archived {
			out = append(out, Status{NamespaceID: e.NamespaceID, Owner: e.Owner, State: string(observer.ChannelClosed)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// GET /v1/namespaces/{id}
func (a *API) getNamespace(w http.ResponseWriter, r *http.Request) {
	id, e := pathID(r)
	if e != nil {
		writeError(w, e)
		return
	}
	st, e := a.namespaceStatus(r.Context(), id)
	if e != nil {
		writeError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// namespaceStatus is the answer of GET /v1/namespaces/{id}.
func (a *API) namespaceStatus(ctx context.Context, id string) (Status, *Error) {
	ns, e := a.lookupID(ctx, id)
	if e != nil {
		return Status{}, e
	}
	st := Status{NamespaceID: ns.id, Owner: ns.owner}
	switch {
	case a.opts.Side == observer.SideHub:
		st.State = StateActive
		st.Sessions = a.hubSessions(ns.id)
		a.addFlows(ctx, ns.id, st.Sessions)
		if a.opts.Log != nil {
			if lj, ok := a.opts.Log(ns.id); ok {
				st.Log = &lj
			}
		}
		if ns.archived {
			st.State = StateArchived
			return st, nil
		}
	case ns.target != nil:
		st.State = string(ns.target.State)
		tj := a.targetJSON(*ns.target)
		st.Code, st.Reason, st.Retry, st.UnreplicatedBytes = tj.Code, tj.Reason, tj.Retry, tj.UnreplicatedBytes
	default:
		st.State = string(observer.ChannelClosed)
	}
	a.peerExtras(ns.id, &st.TargetFacts)
	if a.opts.EditorList != nil {
		st.EditorList = a.opts.EditorList(ns.id)
	}
	if a.opts.PresenceList != nil {
		st.Presence = a.opts.PresenceList(ns.id)
	}
	l, err := a.leases.open(ctx, ns.owner, ns.id)
	if errors.Is(err, registry.ErrNotFound) && ns.target != nil {
		return st, nil // a target not bootstrapped yet: its state only
	}
	if err != nil {
		return Status{}, a.fromErr(err)
	}
	defer a.release(l)
	sv, err := l.StateVector(ctx)
	if err != nil {
		return Status{}, a.fromErr(err)
	}
	ident := l.Identity()
	st.ReplicationID, st.ReplicationEpoch, st.StateVector = ident.ReplicationID, ident.Epoch, hex.EncodeToString(sv)
	st.Schema = schemaJSON(l)
	if st.Name, st.Labels, err = l.Names(ctx); err != nil {
		return Status{}, a.fromErr(err)
	}
	sum := NamespaceSummary{NamespaceID: ns.id}
	a.activity(&sum)
	st.DocumentBytes, st.Writes, st.WriteBytes, st.LastWriteAt = sum.DocumentBytes, &sum.Writes, &sum.WriteBytes, sum.LastWriteAt
	return st, nil
}

// parseRoots reads ?root=NAME:TYPE (repeatable, or comma-separated), as nmcr doc json --root.
func parseRoots(values []string) ([]registry.Root, error) {
	var roots []registry.Root
	seen := map[string]yjs.Kind{}
	for _, v := range values {
		for _, decl := range strings.Split(v, ",") {
			name, k, err := yjs.ParseRootSpec(decl)
			if err != nil {
				return nil, err
			}
			if prev, dup := seen[name]; dup {
				if prev != k {
					return nil, fmt.Errorf("root %q declared twice with different types", name)
				}
				continue
			}
			seen[name] = k
			roots = append(roots, registry.Root{Name: name, Kind: k})
		}
	}
	return roots, nil
}

// GET /v1/namespaces/{id}/doc[?root=NAME:TYPE…][&maxBytes=N]: the document as JSON, every
// root or only the declared ones. A declared type that does not fit what the root holds is
// 400 ROOT_TYPE_MISMATCH naming the type it has. With maxBytes, a JSON answer larger than N
// bytes is 413 DOCUMENT_TOO_LARGE saying how large it is (choose fewer roots).
func (a *API) getDoc(w http.ResponseWriter, r *http.Request) {
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
	_, l, ok := a.lookupOpen(w, r)
	if !ok {
		return
	}
	defer a.release(l)
	doc, err := l.JSON(r.Context(), roots...)
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

// RootJSON is a root of a document as GET /v1/namespaces/{id}/roots lists it: its name,
// its type (the one it has, or as Yjs infers it for a root no client typed) and the size of
// its JSON.
type RootJSON struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	JSONBytes int    `json:"jsonBytes"`
}

// GET /v1/namespaces/{id}/roots: the document's roots, by name. It reads a copy of the
// document, like ?root= of GET …/doc.
func (a *API) getRoots(w http.ResponseWriter, r *http.Request) {
	_, l, ok := a.lookupOpen(w, r)
	if !ok {
		return
	}
	defer a.release(l)
	roots, err := l.Roots(r.Context())
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	out := make([]RootJSON, 0, len(roots))
	for _, root := range roots {
		b, _ := json.Marshal(root.JSON)
		out = append(out, RootJSON{Name: root.Name, Type: root.Kind, JSONBytes: len(b)})
	}
	writeJSON(w, http.StatusOK, out)
}

// GET /v1/namespaces/{id}/update[?sv=HEX]: Y.encodeStateAsUpdate(doc, sv).
func (a *API) getUpdate(w http.ResponseWriter, r *http.Request) {
	sv, err := hex.DecodeString(r.URL.Query().Get("sv"))
	if err != nil {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "sv must be hex"})
		return
	}
	_, l, ok := a.lookupOpen(w, r)
	if !ok {
		return
	}
	defer a.release(l)
	update, err := l.EncodeState(r.Context(), sv)
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(update)))
	w.WriteHeader(http.StatusOK)
	w.Write(update)
}

// POST /v1/namespaces/{id}/update: a Yjs v1 update, applied through the namespace's write
// sequencer (protected check, live apply, dirty notification) and so queued for replication.
// 204 once it is applied and durable in the store.
func (a *API) postUpdate(w http.ResponseWriter, r *http.Request) {
	ns, e := a.lookup(r)
	if e != nil {
		writeError(w, e)
		return
	}
	if a.opts.Side == observer.SidePeer && ns.target == nil && !ns.archived {
		writeError(w, &Error{http.StatusConflict, CodeNotReplicated, "this namespace is not a replication target of this peer, " +
			"so a write here would never reach the hub: add it as a target first (POST /v1/targets)"})
		return
	}
	if ns.target != nil && ns.target.State == observer.ChannelConflicted {
		writeError(w, a.conflicted(ns.id))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(a.opts.MaxUpdateBytes)+1))
	if err != nil {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "reading the body: " + err.Error()})
		return
	}
	if len(body) > a.opts.MaxUpdateBytes {
		msg := fmt.Sprintf("the update exceeds the largest local write, %d bytes", a.opts.MaxUpdateBytes)
		if a.opts.MaxUpdateFlag != "" {
			msg += " (" + a.opts.MaxUpdateFlag + "; give hub and peers the same value)"
		}
		writeError(w, &Error{http.StatusRequestEntityTooLarge, CodeUpdateTooLarge, msg})
		return
	}
	if ns.target != nil && a.opts.LocalWrites != nil {
		if err := a.opts.LocalWrites.AdmitLocalWrite(ns.id, len(body)); err != nil {
			writeError(w, a.refused(ns.id, err))
			return
		}
	}
	l, e := a.open(r, ns)
	if e != nil {
		writeError(w, e)
		return
	}
	defer a.release(l)
	res, err := l.WriteLocal(r.Context(), body)
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	if res.Changed && ns.target != nil && a.opts.LocalWrites != nil {
		a.opts.LocalWrites.LocalWriteApplied(ns.id, len(body))
	}
	if res.Seq > 0 {
		if err := l.WaitFlushed(r.Context(), res.Seq); err != nil {
			writeError(w, a.fromErr(err))
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// conflicted is the answer to a write to a conflicted replica.
func (a *API) conflicted(id string) *Error {
	return &Error{http.StatusConflict, CodeConflicted, "the replica is conflicted with the hub (its copy was replaced: an " +
		"epoch bump or a restore), so a write here would never replicate: reset the replica (POST /v1/targets/" + id +
		"/reset); writes that never reached the hub are kept in its archive"}
}

// refused answers a local write the peer's door refused (namespace.WriteRefusedError): 409
// for a replica that cannot replicate until an operator acts — with the cause and the next
// step the diagnosis gives —, 413 for an update larger than the connection to the hub carries.
func (a *API) refused(id string, err error) *Error {
	var wr *namespace.WriteRefusedError
	if !errors.As(err, &wr) {
		return a.fromErr(err)
	}
	switch wr.Reason {
	case namespace.RefusedConflicted:
		return a.conflicted(id)
	case namespace.RefusedTooLarge:
		return &Error{http.StatusRequestEntityTooLarge, CodeUpdateTooLarge, wr.Error()}
	}
	msg := wr.Error()
	if t, ok := a.opts.Targets.Target(id); ok && a.opts.ExplainTarget != nil {
		if _, reason := a.opts.ExplainTarget(t); reason != "" {
			msg += ". " + reason
		}
	}
	return &Error{http.StatusConflict, CodeReplicaFailed, msg + ". Nothing was written."}
}

// CreateRequest is the body of POST /v1/namespaces.
type CreateRequest struct {
	Owner string `json:"owner"`
	// Name (unique per owner) and Labels are optional.
	Name   string            `json:"name,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Created is the answer of POST /v1/namespaces.
type Created struct {
	NamespaceID      string `json:"namespaceId"`
	ReplicationID    string `json:"replicationId"`
	ReplicationEpoch uint64 `json:"replicationEpoch"`
}

// POST /v1/namespaces (hub)
func (a *API) createNamespace(w http.ResponseWriter, r *http.Request) {
	req := CreateRequest{Owner: "default"}
	if e := readJSON(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := checkOwner(req.Owner); e != nil {
		writeError(w, e)
		return
	}
	c, err := a.opts.Registry.CreateWith(r.Context(), req.Owner, registry.CreateOptions{Name: req.Name, Labels: req.Labels})
	if err != nil {
		writeError(w, a.fromErr(err))
		return
	}
	a.audit(r, "namespace-created", slog.String("namespaceId", c.NamespaceID), slog.Uint64("replicationEpoch", c.Identity.Epoch))
	w.Header().Set("Location", "/v1/namespaces/"+c.NamespaceID)
	writeJSON(w, http.StatusCreated, Created{c.NamespaceID, c.Identity.ReplicationID, c.Identity.Epoch})
}

// SchemaRequest is the body of PUT /v1/namespaces/{id}/schema.
type SchemaRequest struct {
	// Definition is the schema definition: a JSON object.
	Definition json.RawMessage `json:"definition"`
	// UpdatedAt is an RFC 3339 timestamp; absent, the hub's clock stamps it.
	UpdatedAt string `json:"updatedAt,omitempty"`
	// ExpectedFingerprint is required: the semanticFingerprint of the schema being
	// replaced, as GET /v1/namespaces/{id} shows it, or "" when the namespace has none.
	ExpectedFingerprint *string `json:"expectedFingerprint"`
}

// PUT /v1/namespaces/{id}/schema (hub): replace meta.schema; every peer re-arms it as the
// namespace's active schema (docs/protocol.md#document-layout). The body names the schema it
// replaces; a mismatch is 409 SCHEMA_MISMATCH (someone replaced it since it was read).
// Answers the new active schema.
func (a *API) replaceSchema(w http.ResponseWriter, r *http.Request) {
	var req SchemaRequest
	if e := readJSON(r, &req); e != nil {
		writeError(w, e)
		return
	}
	var definition map[string]any
	if err := json.Unmarshal(req.Definition, &definition); err != nil || definition == nil {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "definition must be a JSON object"})
		return
	}
	if req.ExpectedFingerprint == nil {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, `name the schema this replaces: "expectedFingerprint" is the ` +
			`semanticFingerprint GET /v1/namespaces/{id} shows, or "" when the namespace has no schema`})
		return
	}
	updatedAt := req.UpdatedAt
	if updatedAt == "" {
		updatedAt = a.opts.Clock.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	} else if _, err := time.Parse(time.RFC3339Nano, updatedAt); err != nil {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, "updatedAt must be an RFC 3339 timestamp"})
		return
	}
	ns, l, ok := a.lookupOpen(w, r)
	if !ok {
		return
	}
	defer a.release(l)
	// The registry checks the expectation in the same step as the replacement (in a
	// cluster, against the cluster's meta record): of two operators who expect the same
	// schema, on one hub or on two nodes, one wins and the other gets 409.
	before := *req.ExpectedFingerprint
	if err := l.ReplaceSchemaFrom(r.Context(), before, updatedAt, definition); err != nil {
		if errors.Is(err, registry.ErrChanged) {
			shown := `none ("")`
			if s := schemaJSON(l); s != nil {
				shown = s.SemanticFingerprint
			}
			writeError(w, &Error{http.StatusConflict, CodeSchemaMismatch, fmt.Sprintf("the namespace's schema is %s, not %q: it "+
				"changed since you read it; check GET /v1/namespaces/%s, then retry naming the schema you replace", shown, before, ns.id)})
			return
		}
		writeError(w, a.fromErr(err))
		return
	}
	after := schemaJSON(l)
	attrs := []slog.Attr{slog.String("namespaceId", ns.id), slog.String("fromFingerprint", before)}
	if after != nil {
		attrs = append(attrs, slog.String("toFingerprint", after.SemanticFingerprint))
	}
	a.audit(r, "schema-replaced", attrs...)
	writeJSON(w, http.StatusOK, after)
}

// EpochRequest is the body of POST /v1/namespaces/{id}/epoch.
type EpochRequest struct {
	// ExpectedEpoch is required: the namespace's current replicationEpoch, the one the bump
	// replaces.
	ExpectedEpoch *uint64 `json:"expectedEpoch"`
}

// POST /v1/namespaces/{id}/epoch (hub): the epoch bump of docs/protocol.md#identity-fencing;
// every peer session of the old epoch is fenced and its replica becomes conflicted until it
// is reset. The body must name the current epoch ({"expectedEpoch":N}): a bump is never one
// stray request, and of two operators bumping at once one gets 409 EPOCH_MISMATCH.
func (a *API) bumpEpoch(w http.ResponseWriter, r *http.Request) {
	var req EpochRequest
	if e := readJSON(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.ExpectedEpoch == nil {
		writeError(w, &Error{http.StatusBadRequest, CodeBadRequest, `an epoch bump cuts every peer of the namespace off until it is reset: ` +
			`confirm it with the body {"expectedEpoch":N}, N being the replicationEpoch GET /v1/namespaces/{id} shows`})
		return
	}
	ns, l, ok := a.lookupOpen(w, r)
	if !ok {
		return
	}
	defer a.release(l)
	// The registry checks the expectation in the same step as the bump (in a cluster,
	// against the cluster's meta record, by the compare-and-set that claims the bump): of
	// two operators who expect the same epoch, on one hub or on two nodes, one wins and the
	// other gets 409.
	id, err := l.BumpEpochFrom(r.Context(), *req.ExpectedEpoch)
	if err != nil {
		if errors.Is(err, registry.ErrChanged) {
			writeError(w, &Error{http.StatusConflict, CodeEpochMismatch, fmt.Sprintf("the namespace's epoch is %d, not %d: "+
				"nothing was changed; check GET /v1/namespaces/%s before bumping", l.Identity().Epoch, *req.ExpectedEpoch, ns.id)})
			return
		}
		writeError(w, a.fromErr(err))
		return
	}
	a.audit(r, "epoch-bumped", slog.String("namespaceId", ns.id), slog.Uint64("fromEpoch", *req.ExpectedEpoch), slog.Uint64("toEpoch", id.Epoch))
	writeJSON(w, http.StatusOK, map[string]any{"replicationEpoch": id.Epoch})
}
