// Package adminapi is the admin HTTP API of the hub and peer binaries: the routes local
// applications use to create, read and write namespaces (one Yjs document each), follow
// their updates, and, on a peer, manage which namespaces it replicates; plus /metrics,
// /healthz and /readyz. README.md lists the routes.
//
// Every write goes through the namespace's write sequencer (registry.Lease.WriteLocal: the
// check that protected metadata is untouched, the apply, the notification that replicates
// it) and so replicates like any other update; 204 means applied and durable. Errors are
// JSON {"code","message"} with a fitting HTTP status.
//
// Actions that change what every peer sees need the caller to name the state they replace:
// an epoch bump its current epoch, a schema replacement the schema's fingerprint (409 when
// it changed meanwhile). Each change made through the API is one INFO audit line, "admin
// action", saying what changed and who asked (never a token or document content).
//
// The event stream (GET /v1/namespaces/{id}/events) is Server-Sent Events, one `data:` line
// of base64 per applied update. Each stream has a bounded queue (registry.Watch); a client
// that falls behind loses the stream, never memory: overflow policy "end the stream" — it
// ends with `event: overflow` and the client reconnects and catches up from the document
// state (`?state=1` starts a stream with the whole state).
package adminapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nomicore/nomicore/changefeed"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/node/timeline"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/persistence"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/ws"
	"github.com/nomicore/nomicore/versions"
	"github.com/nomicore/nomicore/webhook"
)

// Targets is the peer's target list as the admin API manages it: the namespace layer's
// TargetController behind a store that remembers the targets across restarts
// (docs/protocol.md#restart-and-shutdown).
type Targets interface {
	Targets() []namespace.TargetStatus
	Target(namespaceID string) (namespace.TargetStatus, bool)
	// AddTarget adds (and remembers) a target; it reports whether it was new.
	// namespace.ErrTargetConflict: the namespace is a target with another owner.
	AddTarget(ctx context.Context, t namespace.Target) (created bool, err error)
	// RemoveTarget forgets a target and closes its namespace; namespace.ErrUnknownTarget if absent.
	RemoveTarget(ctx context.Context, namespaceID string) error
	// Reset archives the target's local replica and bootstraps it again.
	Reset(ctx context.Context, namespaceID string) error
}

// LocalWrites is the peer's door for local writes (namespace.TargetController): whether a
// write may be taken, and the count of those taken until the hub holds them.
type LocalWrites interface {
	// AdmitLocalWrite refuses (a *namespace.WriteRefusedError) a write of n bytes that could
	// never replicate; nil takes it.
	AdmitLocalWrite(namespaceID string, n int) error
	// LocalWriteApplied counts a write of n bytes that changed the replica.
	LocalWriteApplied(namespaceID string, n int)
}

// Defaults of Options.
const (
	DefaultMaxEventStreams      = 64
	DefaultEventsMaxQueuedBytes = 4 << 20
	DefaultEventsMaxQueuedCount = 1024
	DefaultEventsKeepAlive      = 15 * time.Second
	DefaultEventsWriteTimeout   = 10 * time.Second
	DefaultMaxUpdateBytes       = 4 << 20
	maxJSONBody                 = 64 << 10
)

// Options configure an API.
type Options struct {
	// Side is SideHub or SidePeer; it selects the routes.
	Side observer.Side
	// Registry holds the namespaces; Store is its catalog (entries by id, health, counters).
	Registry *registry.Registry
	Store    persistence.Catalog
	// Sessions lists a namespace's peer channels (hub: HubNamespaces.Sessions).
	Sessions func(namespaceID string) []namespace.HubSession
	// Targets manages the peer's replication targets (peer only).
	Targets Targets
	// LocalWrites, when set (peer), admits POST …/update before it is written and counts
	// what it wrote until the hub holds it.
	LocalWrites LocalWrites
	// Metrics serves GET /metrics; nil answers 404.
	Metrics http.Handler
	// Ready reports readiness for /readyz: nil when ready, else why not (one short phrase).
	// A store that cannot commit writes (Store.Healthy false) is not ready either;
	// StoreProblem, when set, says why.
	Ready        func() error
	StoreProblem func() string
	// Backup, when set (hub), writes a backup of the hub's state to w (GET /v1/backup) and
	// returns how many bytes it wrote; the API serves it only with an admin token.
	Backup func(ctx context.Context, w io.Writer) (int64, error)
	// ExplainTarget, when set, says why a peer target is not replicating: the error code
	// that ended it, and the reason in words (both empty when it replicates).
	ExplainTarget func(namespace.TargetStatus) (code, reason string)
	// Token, when set, is the bearer token every route but /healthz and /readyz requires.
	Token string
	// MaxUpdateBytes bounds the body of POST …/update (413 UPDATE_TOO_LARGE beyond it);
	// MaxUpdateFlag, when set, is the flag that sets it, which the 413 names.
	MaxUpdateBytes int
	MaxUpdateFlag  string
	// MaxRecreateBytes bounds the body of POST /v1/namespaces/{id}/recreate (a document's
	// whole state; zero: DefaultMaxRecreateBytes).
	MaxRecreateBytes int
	// MaxEventStreams bounds concurrent event streams (503 TOO_MANY_STREAMS beyond it).
	MaxEventStreams int
	// EventsMaxQueuedBytes and EventsMaxQueuedCount bound each stream's queue.
	EventsMaxQueuedBytes, EventsMaxQueuedCount int
	// EventsKeepAlive is the interval of keep-alive comments on an idle stream;
	// EventsWriteTimeout bounds each write to a stream client.
	EventsKeepAlive, EventsWriteTimeout time.Duration
	// LeaseIdle is how long a namespace the API used stays loaded after its last request
	// (zero: DefaultLeaseIdle; negative: not at all); MaxCachedLeases bounds how many stay.
	LeaseIdle       time.Duration
	MaxCachedLeases int
	// Clock paces keep-alives and the lease cache; nil means clock.Real().
	Clock clock.Clock
	// Logger receives internal failures (never bytes, tokens or document content).
	Logger *slog.Logger

	// What the status routes (GET /v1/status, its stream, /v1/connections, /v1/events)
	// show; each is optional, and what is not given is left out of the answers.
	InstanceID string
	Version    string
	StartedAt  time.Time
	// Listeners are the process's listen addresses by name (admin, replication, client).
	Listeners map[string]string
	// Timeline supplies the recent events, the traffic totals and the connection history.
	Timeline *timeline.Timeline
	// Connections lists the hub's connections (hub: ws.Hub.Connections).
	Connections func() []ws.ConnStatus
	// Flows asks the hub's connections about one namespace's live updates
	// (ws.Hub.NamespaceFlows); GET /v1/namespaces/{id} shows them with the sessions.
	Flows func(ctx context.Context, namespaceID string) []ws.Flow
	// Load is the outbound load of the replication connections (ws.Hub.Load, ws.Peer.Load).
	Load func() ws.Load
	// Link describes the peer's connection to its hub (peer).
	Link func() LinkInfo
	// Editors counts the editors connected to a namespace (false when the process serves
	// no editors).
	Editors func(namespaceID string) (int, bool)
	// Stateless, when set, serves POST /v1/namespaces/{id}/stateless (see postStateless).
	Stateless Stateless
	// Log reports how this node of a hub cluster follows a namespace's log (false when the
	// process is not a cluster node or does not have the namespace loaded).
	Log func(namespaceID string) (LogJSON, bool)
	// Changes, when set (hub), serves the change feed: GET /v1/changes and
	// /v1/changes/latest; ChangesServed, when set, counts the changes sent on its streams.
	Changes       changefeed.Source
	ChangesServed func(n int)
	// Versions, when set (hub), serves the versions of each namespace:
	// /v1/namespaces/{id}/versions….
	Versions *versions.Service
	// Webhooks, when set (hub with --webhook-url), reports each endpoint's delivery state
	// (GET /v1/webhooks, GET /v1/status and the dashboard).
	Webhooks func() []webhook.Status
	// Clients, when set, manages the editors' credentials (/v1/clients): a node whose
	// client listener checks them (--client-auth token).
	Clients Clients
	// EditorList lists the editors connected to a namespace (GET /v1/namespaces/{id} and
	// the dashboard show who: users and client names, never tokens).
	EditorList func(namespaceID string) []EditorJSON
	// PresenceList, when set, lists the editors present in a namespace across the system
	// (GET /v1/namespaces/{id}).
	PresenceList func(namespaceID string) []PresenceJSON
	// UI, when set, serves the dashboard at GET / and GET /ui/…: pages and assets anyone
	// may load (they hold no data; the data routes they call require the token).
	UI http.Handler
}

// API is the admin HTTP handler of one binary.
type API struct {
	opts Options
	mux  *http.ServeMux
	log  *slog.Logger

	leases  *leaseCache
	streams chan struct{} // a slot per running event stream
	stop    chan struct{} // closed by Close: event streams end
	once    sync.Once

	mu      sync.Mutex                      // guards running
	running map[string]map[*stream]struct{} // event streams by namespace id
}

// stream is one running event stream: stop ends it, done is closed once it released its
// lease.
type stream struct{ stop, done chan struct{} }

// New returns the admin API.
func New(opts Options) (*API, error) {
	if opts.Registry == nil || opts.Store == nil {
		return nil, errors.New("adminapi: a registry and its store are required")
	}
	switch opts.Side {
	case observer.SideHub:
	case observer.SidePeer:
		if opts.Targets == nil {
			return nil, errors.New("adminapi: a peer needs its targets")
		}
	default:
		return nil, errors.New("adminapi: side must be hub or peer")
	}
	if opts.MaxUpdateBytes <= 0 {
		opts.MaxUpdateBytes = DefaultMaxUpdateBytes
	}
	if opts.MaxEventStreams <= 0 {
		opts.MaxEventStreams = DefaultMaxEventStreams
	}
	if opts.EventsMaxQueuedBytes <= 0 {
		opts.EventsMaxQueuedBytes = DefaultEventsMaxQueuedBytes
	}
	if opts.EventsMaxQueuedCount <= 0 {
		opts.EventsMaxQueuedCount = DefaultEventsMaxQueuedCount
	}
	if opts.EventsKeepAlive <= 0 {
		opts.EventsKeepAlive = DefaultEventsKeepAlive
	}
	if opts.EventsWriteTimeout <= 0 {
		opts.EventsWriteTimeout = DefaultEventsWriteTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.LeaseIdle == 0 {
		opts.LeaseIdle = DefaultLeaseIdle
	}
	if opts.MaxCachedLeases <= 0 {
		opts.MaxCachedLeases = DefaultMaxCachedLeases
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &API{opts: opts, mux: http.NewServeMux(), log: log,
		leases:  newLeaseCache(opts.Registry, opts.Clock, opts.LeaseIdle, opts.MaxCachedLeases),
		streams: make(chan struct{}, opts.MaxEventStreams), stop: make(chan struct{}),
		running: map[string]map[*stream]struct{}{}}
	a.routes()
	return a, nil
}

// Close ends every event stream and releases the cached leases (at shutdown, before the
// registry closes). Idempotent.
func (a *API) Close() {
	a.once.Do(func() {
		close(a.stop)
		a.leases.close()
	})
}

// addStream registers a running event stream of namespace id.
func (a *API) addStream(id string) *stream {
	st := &stream{stop: make(chan struct{}), done: make(chan struct{})}
	a.mu.Lock()
	if a.running[id] == nil {
		a.running[id] = map[*stream]struct{}{}
	}
	a.running[id][st] = struct{}{}
	a.mu.Unlock()
	return st
}

func (a *API) removeStream(id string, st *stream) {
	a.mu.Lock()
	delete(a.running[id], st)
	if len(a.running[id]) == 0 {
		delete(a.running, id)
	}
	a.mu.Unlock()
	close(st.done)
}

// unload ends the event streams of namespace id and drops its cached lease, and waits (or
// ctx) until the streams released their leases: a peer reset needs the namespace unloaded.
func (a *API) unload(ctx context.Context, id string) {
	a.mu.Lock()
	var list []*stream
	for st := range a.running[id] {
		list = append(list, st)
		select {
		case <-st.stop:
		default:
			close(st.stop)
		}
	}
	a.mu.Unlock()
	for _, st := range list {
		select {
		case <-st.done:
		case <-ctx.Done():
			return
		}
	}
	a.leases.drop(id)
}

func (a *API) routes() {
	m := a.mux
	m.HandleFunc("GET /healthz", a.healthz)
	m.HandleFunc("GET /readyz", a.readyz)
	m.HandleFunc("GET /metrics", a.metrics)
	m.HandleFunc("GET /v1/namespaces", a.listNamespaces)
	m.HandleFunc("GET /v1/namespaces/{id}", a.getNamespace)
	m.HandleFunc("GET /v1/namespaces/{id}/doc", a.getDoc)
	m.HandleFunc("GET /v1/namespaces/{id}/update", a.getUpdate)
	m.HandleFunc("POST /v1/namespaces/{id}/update", a.postUpdate)
	m.HandleFunc("GET /v1/namespaces/{id}/events", a.events)
	m.HandleFunc("GET /v1/namespaces/{id}/roots", a.getRoots)
	m.HandleFunc("POST /v1/namespaces/{id}/stateless", a.postStateless)
	m.HandleFunc("GET /v1/status", a.getStatus)
	m.HandleFunc("GET /v1/status/stream", a.statusStream)
	m.HandleFunc("GET /v1/events", a.getEvents)
	m.HandleFunc("POST /v1/clients", a.withClients(a.addClient))
	m.HandleFunc("GET /v1/clients", a.withClients(a.listClients))
	m.HandleFunc("PATCH /v1/clients/{name}", a.withClients(a.updateClient))
	m.HandleFunc("DELETE /v1/clients/{name}", a.withClients(a.removeClient))
	m.HandleFunc("POST /v1/clients/revoke", a.withClients(a.revokeClient))
	m.HandleFunc("GET /v1/clients/revocations", a.withClients(a.listRevocations))
	if a.opts.UI != nil {
		m.Handle("GET /{$}", a.opts.UI)
		m.Handle("GET /ui/", a.opts.UI)
		m.Handle("GET /favicon.ico", a.opts.UI)
	}
	if a.opts.Side == observer.SideHub {
		m.HandleFunc("GET /v1/backup", a.backup)
		m.HandleFunc("GET /v1/connections", a.getConnections)
		m.HandleFunc("POST /v1/namespaces", a.createNamespace)
		m.HandleFunc("POST /v1/namespaces/{id}/epoch", a.bumpEpoch)
		m.HandleFunc("POST /v1/namespaces/{id}/recreate", a.recreate)
		m.HandleFunc("DELETE /v1/namespaces/{id}", a.deleteNamespace)
		m.HandleFunc("PATCH /v1/namespaces/{id}", a.patchNamespace)
		m.HandleFunc("PUT /v1/namespaces/{id}/schema", a.replaceSchema)
		a.feedRoutes(m)
	} else {
		m.HandleFunc("GET /v1/targets", a.listTargets)
		m.HandleFunc("POST /v1/targets", a.addTarget)
		m.HandleFunc("DELETE /v1/targets/{id}", a.removeTarget)
		m.HandleFunc("POST /v1/namespaces/{id}/reset", a.reset)
		m.HandleFunc("POST /v1/targets/{id}/reset", a.reset)
	}
}

// ServeHTTP checks the admin token, then routes. Unknown routes and wrong methods answer
// with the JSON error shape too.
//
// The request's Pattern is set to its route before anything else, so that an access log
// around the API names the route of every answer, refusals included.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := a.mux.Handler(r)
	r.Pattern = pattern
	if e := a.checkBrowser(r); e != nil {
		writeError(w, e)
		return
	}
	if a.opts.Token != "" && !a.public(r) && !a.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nomicore-admin"`)
		writeError(w, &Error{http.StatusUnauthorized, CodeUnauthorized, "missing or invalid admin token"})
		return
	}
	if pattern == "" {
		// The mux's own answer (404, or 405 with Allow), in our error shape.
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		switch rec.status {
		case http.StatusMethodNotAllowed:
			writeError(w, &Error{rec.status, CodeMethodNotAllowed, r.Method + " is not allowed on " + r.URL.Path})
		default:
			writeError(w, &Error{http.StatusNotFound, CodeNotFound, "no route " + r.URL.Path})
		}
		return
	}
	a.mux.ServeHTTP(w, r)
}

// audit writes the one INFO line of an admin action that changes something: what (action
// and attrs: namespace ids, epochs, fingerprints — never owners, tokens or content), who
// ("admin-token" when the API requires one, else "loopback": the API then listens on
// loopback only) and from where.
func (a *API) audit(r *http.Request, action string, attrs ...slog.Attr) {
	by := "loopback"
	if a.opts.Token != "" {
		by = "admin-token"
	}
	attrs = append([]slog.Attr{slog.String("action", action), slog.String("by", by), slog.String("remote", r.RemoteAddr)}, attrs...)
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "admin action", attrs...)
}

// public reports whether a request needs no token: liveness, readiness and the dashboard's
// pages and assets.
func (a *API) public(r *http.Request) bool {
	switch p := r.URL.Path; {
	case p == "/healthz" || p == "/readyz":
		return true
	case a.opts.UI != nil && (p == "/" || p == "/favicon.ico" || strings.HasPrefix(p, "/ui/")):
		return true
	}
	return false
}

// checkBrowser refuses what a web page of another site could make a browser send (the
// dashboard puts a browser in front of the API):
//
//   - a request that changes something, sent from another origin (the browser says so in
//     Origin or Sec-Fetch-Site): 403 CROSS_ORIGIN — a page elsewhere cannot post to the
//     API, whatever the body's type;
//   - without an admin token (the API then listens on loopback only), a request whose Host
//     is not a loopback name or address: 403 HOST_NOT_ALLOWED — a site whose name an
//     attacker points at 127.0.0.1 (DNS rebinding) cannot read the API as its own origin.
func (a *API) checkBrowser(r *http.Request) *Error {
	if a.opts.Token == "" && !loopbackHost(r.Host) {
		return &Error{http.StatusForbidden, CodeHostNotAllowed, "without an admin token the API answers only requests " +
			"addressed to a loopback name (127.0.0.1, [::1] or localhost); got Host " + r.Host}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" || r.Header.Get("Sec-Fetch-Site") == "same-site" {
		return &Error{http.StatusForbidden, CodeCrossOrigin, "requests from other web pages are refused"}
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return &Error{http.StatusForbidden, CodeCrossOrigin, "requests from other web pages are refused (Origin " + o + ")"}
		}
	}
	return nil
}

// loopbackHost reports whether a Host header names loopback: localhost, 127.0.0.0/8 or ::1,
// with or without a port.
func loopbackHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (a *API) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(auth) < len(prefix) || !strings.EqualFold(auth[:len(prefix)], prefix) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(auth[len(prefix):])), []byte(a.opts.Token)) == 1
}

type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusRecorder) WriteHeader(code int)        { s.status = code }

func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"ready": true}
	if !a.opts.Store.Healthy() {
		body["persistence"] = "degraded"
	} else {
		body["persistence"] = "healthy"
	}
	if a.opts.Ready != nil {
		if err := a.opts.Ready(); err != nil {
			body["ready"] = false
			body["reason"] = err.Error()
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
	}
	if body["persistence"] == "degraded" {
		// Writes are refused (PERSISTENCE_DEGRADED) until the store commits again.
		reason := "persistence degraded: the store cannot commit writes; it keeps trying"
		if a.opts.StoreProblem != nil {
			if p := a.opts.StoreProblem(); p != "" {
				reason = "persistence degraded: " + p
			}
		}
		body["ready"], body["reason"] = false, reason
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (a *API) metrics(w http.ResponseWriter, r *http.Request) {
	if a.opts.Metrics == nil {
		writeError(w, &Error{http.StatusNotFound, CodeNotFound, "metrics are not enabled"})
		return
	}
	a.opts.Metrics.ServeHTTP(w, r)
}

// readJSON decodes a small JSON body into v; an empty body leaves v as it is. A body must
// be JSON (415 UNSUPPORTED_MEDIA_TYPE for another Content-Type) of at most 64 KiB (413
// REQUEST_TOO_LARGE), with no field v does not have.
func readJSON(r *http.Request, v any) *Error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxJSONBody+1))
	if err != nil {
		return &Error{http.StatusBadRequest, CodeBadRequest, "reading the body: " + err.Error()}
	}
	if len(body) > maxJSONBody {
		return &Error{http.StatusRequestEntityTooLarge, CodeRequestTooLarge, fmt.Sprintf("the JSON body exceeds %d bytes", maxJSONBody)}
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return &Error{http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
				"the body must be JSON, sent with Content-Type: application/json (curl -H 'Content-Type: application/json' -d …), or empty; got " + ct}
		}
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &Error{http.StatusBadRequest, CodeBadRequest, "malformed JSON body: " + err.Error()}
	}
	if dec.More() {
		return &Error{http.StatusBadRequest, CodeBadRequest, "trailing data after the JSON body"}
	}
	return nil
}

// checkOwner refuses an owner that is not a local storage partition name
// (persistence.MaxNameBytes of UTF-8).
func checkOwner(s string) *Error {
	if s == "" || len(s) > persistence.MaxNameBytes || !utf8.ValidString(s) {
		return &Error{http.StatusBadRequest, CodeBadRequest, "owner must be 1 to 255 bytes of UTF-8"}
	}
	return nil
}

// pathID returns the namespace id of the route's {id}.
func pathID(r *http.Request) (string, *Error) {
	id := r.PathValue("id")
	if !registry.ValidNamespaceID(id) {
		return "", &Error{http.StatusBadRequest, CodeBadRequest, "namespace id must be ns- and 32 lowercase hex digits"}
	}
	return id, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, &Error{http.StatusInternalServerError, CodeInternal, "encoding the answer: " + err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
