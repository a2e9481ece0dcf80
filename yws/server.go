package yws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/registry"
)

// Errors a Namespaces lookup returns; each is refused before the upgrade.
var (
	// ErrUnknownNamespace: this node does not serve the namespace (404): not on the hub,
	// or not a target of the peer.
	ErrUnknownNamespace = errors.New("namespace unknown to this node")
	// ErrNamespaceDeleted: the namespace was deleted (404 NAMESPACE_DELETED): on the hub,
	// or on a peer that learnt it from the hub.
	ErrNamespaceDeleted = errors.New("the namespace was deleted")
	// ErrNotReady: the node serves the namespace but cannot open it yet (503): a peer
	// target not bootstrapped yet.
	ErrNotReady = errors.New("the namespace is not ready on this node yet")
	// ErrConflicted: a peer replica in conflicted (409): an operator must reset it.
	ErrConflicted = errors.New("the replica is conflicted with the hub; reset it first")
	// ErrReplicaFailed: a peer replica whose replication failed for a cause an operator
	// must remove (409): what an editor writes there would not replicate.
	ErrReplicaFailed = errors.New("replication of this replica failed and waits for an operator")
)

// Namespaces resolves a namespace id to its local owner, or one of the errors above.
type Namespaces func(ctx context.Context, namespaceID string) (owner string, err error)

// WriteGate is the door of a node whose writes must replicate to reach others (a peer):
// whether an editor's update may be written, and the count of those written until they
// replicate.
type WriteGate interface {
	// AdmitWrite returns nil to take an update of n bytes to a namespace. A refusal that
	// matches ErrUpdateTooLarge refuses that update alone: the editor is told (auth
	// PermissionDenied, with the error's text) and its later updates that build on it are
	// dropped, as for a protected write. Any other refusal (the replica cannot replicate
	// now) closes the connection with 1013: the provider reconnects, and its resync carries
	// the update again once the replica can take it. It must not block.
	AdmitWrite(namespaceID string, n int) error
	// Written counts an update of n bytes that changed the namespace's document, and returns
	// the wait for that count to be durable (nil: nothing to wait for). The update is
	// acknowledged to its editor and relayed to the others only once both the update and
	// its count are durable, so that a crash right after cannot lose the count of a write
	// an editor was told is saved. It must not block.
	Written(namespaceID string, n int) (counted func(context.Context) error)
}

// ErrUpdateTooLarge: a WriteGate refusal of one update over what the node's connection to
// the hub carries.
var ErrUpdateTooLarge = errors.New("the update is larger than the connection to the hub carries")

// Defaults of Options.
const (
	DefaultMaxClients             = 1024
	DefaultMaxMessageBytes        = 4<<20 + 64
	DefaultSendQueueBytes         = 8 << 20
	DefaultSendQueueMessages      = 4096
	DefaultMaxAwarenessStates     = 256
	DefaultMaxAwarenessStateBytes = 16 << 10
	DefaultAwarenessTimeout       = 30 * time.Second
	DefaultKeepAlive              = 10 * time.Second
	DefaultWriteTimeout           = 10 * time.Second
	DefaultMaxGapClients          = 64
	DefaultRelayQueueBytes        = 16 << 20
)

// Options configure a Server.
type Options struct {
	// Registry holds the namespaces; Namespaces says which of them this node serves.
	Registry   *registry.Registry
	Namespaces Namespaces
	// Writes, when set, admits every editor update before it is written and counts those
	// written (a peer: see WriteGate). Nil takes every update.
	Writes WriteGate
	// Clients checks editors' credentials (the node's static client tokens: auth.Reloader);
	// nil means no authentication (--client-auth none: every editor may read and write
	// every namespace this node serves).
	Clients auth.ClientAuthenticator
	// OriginPatterns are the browser origins allowed to open a WebSocket besides the
	// page's own host (github.com/coder/websocket AcceptOptions.OriginPatterns: host
	// patterns such as "*" or "app.example.com:*"). Empty: same host only.
	OriginPatterns []string
	// MaxClients bounds the editor connections of the node (503 beyond it).
	MaxClients int
	// MaxMessageBytes bounds one client message (a larger one closes the socket with 1009).
	MaxMessageBytes int
	// SendQueueBytes and SendQueueMessages bound what waits to be sent to one client
	// behind the first message waiting (taken whole whatever its size: a big document's
	// SyncStep2); beyond either, the client is dropped and resyncs when it reconnects.
	SendQueueBytes, SendQueueMessages int
	// MaxAwarenessStates bounds the awareness states of one namespace on this node (a
	// state beyond it is dropped), and MaxAwarenessStateBytes the JSON of one state (a
	// larger one closes the connection with 1008, like the Limits).
	MaxAwarenessStates, MaxAwarenessStateBytes int
	// AwarenessTimeout removes a state not renewed for that long (y-protocols: 30 s).
	AwarenessTimeout time.Duration
	// KeepAlive is the longest a client goes without a message from the node (an empty
	// awareness update is sent then): the provider reconnects after 30 s of silence.
	KeepAlive time.Duration
	// WriteTimeout bounds one write to a client: a message, or each frame (1 MiB) of a
	// larger one.
	WriteTimeout time.Duration
	// MaxGapClients bounds, per connection, the Yjs client ids whose clock has a gap left by a
	// refused update (beyond it the connection is closed).
	MaxGapClients int
	// RelayQueueBytes bounds, per namespace, the accepted editor updates waiting to be
	// durable before they are relayed (readers wait beyond it).
	RelayQueueBytes int
	// Limits bound each user's connections and each connection's rates (see Limits); a
	// Hocuspocus socket is one connection, of each user with a document open on it.
	Limits Limits
	// Presence, when set, carries awareness between this node's editors and other nodes'
	// (see Presence); nil keeps awareness node-local.
	Presence Presence
	// Hocuspocus bounds what one Hocuspocus socket holds (see HocuspocusOptions).
	Hocuspocus HocuspocusOptions
	// Metrics receives the counters and gauges; nil counts nothing.
	Metrics *Metrics
	// Clock paces keep-alives and awareness timeouts; nil means clock.Real().
	Clock clock.Clock
	// Logger gets the connect and disconnect lines and refusals (never tokens or document
	// bytes).
	Logger *slog.Logger
}

func (o *Options) fill() {
	fillInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	fillDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	fillInt(&o.MaxClients, DefaultMaxClients)
	fillInt(&o.MaxMessageBytes, DefaultMaxMessageBytes)
	fillInt(&o.SendQueueBytes, DefaultSendQueueBytes)
	fillInt(&o.SendQueueMessages, DefaultSendQueueMessages)
	fillInt(&o.MaxAwarenessStates, DefaultMaxAwarenessStates)
	fillInt(&o.MaxAwarenessStateBytes, DefaultMaxAwarenessStateBytes)
	fillInt(&o.MaxGapClients, DefaultMaxGapClients)
	fillInt(&o.RelayQueueBytes, DefaultRelayQueueBytes)
	fillDur(&o.AwarenessTimeout, DefaultAwarenessTimeout)
	fillDur(&o.KeepAlive, DefaultKeepAlive)
	fillDur(&o.WriteTimeout, DefaultWriteTimeout)
	o.Limits.fill()
	o.Hocuspocus.fill()
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Server is the editor endpoint of one node: it serves GET /v1/yjs/{namespaceId} in the
// y-websocket protocol, GET /v1/hocuspocus in the Hocuspocus protocol and the editor page
// under /edit/; the editors of both protocols share one room per namespace. See the
// package doc.
type Server struct {
	opts Options
	log  *slog.Logger
	m    *Metrics
	mux  *http.ServeMux

	clients  atomic.Int64 // admitted connections (MaxClients)
	users    userConns    // open connections per user (Limits.ConnectionsPerUser)
	handlers sync.WaitGroup

	mu       sync.Mutex // guards rooms and closing
	rooms    map[string]*room
	closing  bool
	shutdown chan struct{} // closed by Shutdown
}

// New returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Registry == nil || opts.Namespaces == nil {
		return nil, errors.New("yws: a registry and a namespace lookup are required")
	}
	opts.fill()
	s := &Server{opts: opts, log: opts.Logger, m: opts.Metrics, rooms: map[string]*room{}, shutdown: make(chan struct{})}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /v1/yjs/{id}", s.serveEditor)
	s.mux.HandleFunc("GET "+HocuspocusPath, s.serveHocuspocus)
	s.mux.HandleFunc("GET /edit/{id}", s.servePage)
	s.mux.HandleFunc("GET /edit/rich/{id}", s.serveRichPage)
	s.mux.Handle("GET /edit/assets/", http.StripPrefix("/edit/assets/", assetHandler()))
	s.mux.HandleFunc("GET /favicon.ico", serveFavicon)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{\"status\":\"ok\"}\n"))
	})
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "no such route: editors connect to /v1/yjs/{namespaceId} (y-websocket) or "+HocuspocusPath+" (Hocuspocus); the editor page is /edit/{namespaceId}")
	})
	return s, nil
}

// ServeHTTP serves the client listener's routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// writeError writes the JSON error body every refusal before the upgrade carries.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeRefusal(w, status, code, "", msg)
}

// writeRefusal is writeError naming the check of the credential that failed (empty: none
// did), {"code","check","message"}. It never carries the token.
func writeRefusal(w http.ResponseWriter, status int, code, check, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Code    string `json:"code"`
		Check   string `json:"check,omitempty"`
		Message string `json:"message"`
	}{code, check, msg})
}

// presentedToken returns the token of a request — ?token= (browsers cannot set headers on
// a WebSocket) or Authorization: Bearer — and removes it from the request, so nothing
// after this point (logs included) can see it.
func presentedToken(r *http.Request) string {
	q := r.URL.Query()
	tok := q.Get("token")
	if tok != "" {
		q.Del("token")
		r.URL.RawQuery = q.Encode()
		r.RequestURI = r.URL.RequestURI()
	}
	if h := r.Header.Get("Authorization"); tok == "" && len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		tok = strings.TrimSpace(h[7:])
	}
	r.Header.Del("Authorization")
	return tok
}

// admit checks a connection request before the upgrade: 401 without a known token, 403
// when the token does not grant the namespace, 404 for a namespace this node does not
// serve, 409 for a conflicted replica, 503 when not ready, over --max-clients or shutting
// down. On success the caller holds one of the MaxClients places.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, ns string) (auth.ClientGrant, string, bool) {
	refuse := func(status int, code, reason, msg string) (auth.ClientGrant, string, bool) {
		s.m.refusedConnect(reason)
		writeError(w, status, code, msg)
		return auth.ClientGrant{}, "", false
	}
	// refuseCheck is refuse for a failed check of the credential, which the body names.
	refuseCheck := func(status int, code, check, msg string) (auth.ClientGrant, string, bool) {
		s.m.refusedConnect(check)
		writeRefusal(w, status, code, check, msg)
		return auth.ClientGrant{}, "", false
	}
	tok := presentedToken(r)
	grant := auth.ClientGrant{Name: "anonymous", Namespaces: []string{auth.AllNamespaces}}
	if s.opts.Clients != nil {
		if tok == "" {
			return refuseCheck(http.StatusUnauthorized, "UNAUTHORIZED", "missing-token",
				"a client token is required: connect with ?token=TOKEN (or an Authorization: Bearer header); create one with `hub token add --client NAME` (or `peer token add`), or have the application sign one")
		}
		g, err := s.opts.Clients.AuthenticateClient(r.Context(), auth.ClientCredential{Token: tok, NamespaceID: ns, RemoteAddr: r.RemoteAddr})
		var refusal *auth.ClientRefusal
		var unavailable *auth.UnavailableError
		switch {
		case errors.As(err, &refusal) && errors.Is(err, auth.ErrForbidden):
			s.log.Debug("editor connection refused", slog.String("namespaceId", ns), slog.String("remote", r.RemoteAddr),
				slog.String("check", refusal.Check))
			return refuseCheck(http.StatusForbidden, "FORBIDDEN", refusal.Check, refusal.Reason)
		case errors.As(err, &refusal):
			s.log.Debug("editor connection refused", slog.String("namespaceId", ns), slog.String("remote", r.RemoteAddr),
				slog.String("check", refusal.Check), slog.String("reason", refusal.Reason))
			return refuseCheck(http.StatusUnauthorized, "UNAUTHORIZED", refusal.Check, refusal.Reason)
		case errors.Is(err, auth.ErrUnauthenticated):
			return refuseCheck(http.StatusUnauthorized, "UNAUTHORIZED", auth.CheckUnknownToken, "the client token is not known to this node")
		case errors.As(err, &unavailable):
			s.log.Warn("editor connection refused: the credential cannot be checked now", slog.String("namespaceId", ns),
				slog.String("error", err.Error()))
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(unavailable.RetryAfter.Round(time.Second)/time.Second))))
			return refuse(http.StatusServiceUnavailable, "UNAVAILABLE", "auth-unavailable", unavailable.What+"; retry shortly")
		case err != nil:
			s.log.Warn("editor connection refused: the client token cannot be checked", slog.String("namespaceId", ns),
				slog.String("error", err.Error()))
			w.Header().Set("Retry-After", "5")
			return refuse(http.StatusServiceUnavailable, "UNAVAILABLE", "auth-unavailable", "the client token cannot be checked now; retry shortly")
		}
		grant = g
	}
	if !validNamespaceID(ns) {
		return refuse(http.StatusNotFound, "NAMESPACE_NOT_FOUND", "unknown-namespace", "not a namespace id (ns- and 32 hex digits)")
	}
	if !grant.Allows(ns) {
		return refuseCheck(http.StatusForbidden, "FORBIDDEN", "namespace-not-granted", "the credential does not grant this namespace")
	}
	owner, err := s.opts.Namespaces(r.Context(), ns)
	switch {
	case errors.Is(err, ErrNamespaceDeleted):
		return refuse(http.StatusNotFound, "NAMESPACE_DELETED", "deleted-namespace", "the namespace was deleted")
	case errors.Is(err, ErrUnknownNamespace):
		return refuse(http.StatusNotFound, "NAMESPACE_NOT_FOUND", "unknown-namespace", "this node does not serve the namespace")
	case errors.Is(err, ErrNotReady):
		return refuse(http.StatusServiceUnavailable, "NOT_BOOTSTRAPPED", "not-ready", "the namespace is not bootstrapped on this node yet; retry shortly")
	case errors.Is(err, ErrConflicted):
		return refuse(http.StatusConflict, "REPLICA_CONFLICTED", "conflicted", ErrConflicted.Error())
	case errors.Is(err, ErrReplicaFailed):
		return refuse(http.StatusConflict, "REPLICA_FAILED", "replica-failed", err.Error())
	case err != nil:
		return refuse(http.StatusInternalServerError, "INTERNAL_ERROR", "internal", "the namespace cannot be looked up")
	}
	if s.clients.Add(1) > int64(s.opts.MaxClients) {
		s.clients.Add(-1)
		return refuse(http.StatusServiceUnavailable, "TOO_MANY_CLIENTS",
			"too-many-clients", fmt.Sprintf("this node serves at most %d editor connections (--max-clients)", s.opts.MaxClients))
	}
	return grant, owner, true
}

// GET /v1/yjs/{id}: the y-websocket endpoint.
func (s *Server) serveEditor(w http.ResponseWriter, r *http.Request) {
	s.handlers.Add(1)
	defer s.handlers.Done()
	ns := r.PathValue("id")
	if s.isClosing() {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the node is shutting down")
		return
	}
	stateless := r.URL.Query().Get("stateless") == "1" // the application handles stateless messages
	grant, owner, ok := s.admit(w, r, ns)
	if !ok {
		return
	}
	defer s.clients.Add(-1)
	rm, err := s.join(r.Context(), ns, owner)
	if err != nil {
		switch {
		case errors.Is(err, registry.ErrDeleted):
			writeError(w, http.StatusNotFound, "NAMESPACE_DELETED", "the namespace was deleted")
		case errors.Is(err, registry.ErrNotFound):
			writeError(w, http.StatusServiceUnavailable, "NOT_BOOTSTRAPPED", "the namespace is not available on this node yet; retry shortly")
		case errors.Is(err, errClosing):
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the node is shutting down")
		default:
			s.log.Warn("editor connection refused: the namespace cannot be opened", slog.String("client", grant.Name),
				slog.String("namespaceId", ns), slog.String("error", err.Error()))
			writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the namespace cannot be opened now; retry shortly")
		}
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.opts.OriginPatterns,
		CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.leave(rm, nil)
		s.log.Info("editor upgrade failed", slog.String("client", grant.Name), slog.String("namespaceId", ns), slog.String("error", err.Error()))
		return
	}
	ws.SetReadLimit(int64(s.opts.MaxMessageBytes))
	c := newConn(s, rm, ws, grant, r.RemoteAddr, stateless)
	c.run()
}

// validNamespaceID reports whether id is ns- and 32 lowercase hex digits.
func validNamespaceID(id string) bool { return registry.ValidNamespaceID(id) }

var errClosing = errors.New("yws: shutting down")

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// join returns the namespace's room, opening it (a lease and a watch) for its first
// connection; the caller holds one reference until leave.
func (s *Server) join(ctx context.Context, ns, owner string) (*room, error) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil, errClosing
	}
	rm := s.rooms[ns]
	if rm == nil {
		rm = newRoom(s, ns, owner)
		s.rooms[ns] = rm
		rm.refs = 1
		s.mu.Unlock()
		if err := rm.open(ctx); err != nil {
			rm.openErr = err
			s.mu.Lock()
			if s.rooms[ns] == rm {
				delete(s.rooms, ns)
			}
			s.mu.Unlock()
			close(rm.ready)
			s.leave(rm, nil)
			return nil, err
		}
		close(rm.ready)
		return rm, nil
	}
	rm.refs++
	s.mu.Unlock()
	select {
	case <-rm.ready:
	case <-ctx.Done():
		s.leave(rm, nil)
		return nil, ctx.Err()
	}
	if rm.openErr == nil {
		return rm, nil
	}
	s.leave(rm, nil)
	return nil, rm.openErr
}

// leave drops one reference to a room (and c from it, when set); the last one closes it.
func (s *Server) leave(rm *room, c editor) {
	if c != nil {
		rm.remove(c)
	}
	s.mu.Lock()
	rm.refs--
	last := rm.refs == 0
	if last && s.rooms[rm.ns] == rm {
		delete(s.rooms, rm.ns)
	}
	s.mu.Unlock()
	if last {
		rm.close()
	}
}

// Revalidate checks every open connection against the current tokens (call it after the
// tokens file was reloaded): a connection whose token was removed is closed (4401), one
// whose token no longer grants its namespace too (4403); a change to read-only applies at
// once. Without Clients it does nothing.
func (s *Server) Revalidate() {
	if s.opts.Clients == nil {
		return
	}
	for _, m := range s.editors() {
		s.revalidate(m.ed, m.ns)
	}
}

// revalidate applies the current grant of c's token to c, an editor of namespace ns: closed
// when the token was removed or no longer grants the namespace, read-only as the grant
// says. An editor calls it once it is in its room, so that a Revalidate that ran between
// the token check and that moment (it did not see the editor) is not missed.
func (s *Server) revalidate(c editor, ns string) {
	if s.opts.Clients == nil {
		return
	}
	g, err := s.opts.Clients.RecheckClient(c.credential())
	var refusal *auth.ClientRefusal
	switch {
	case errors.As(err, &refusal) && refusal.Check == auth.CheckRevoked:
		c.closeWith(statusTokenRevoked, "the credential was revoked", "token-revoked")
	case errors.As(err, &refusal) && refusal.Check == auth.CheckExpired:
		c.closeWith(statusTokenRevoked, "the token expired; reconnect with a fresh one", "token-expired")
	case err != nil:
		c.closeWith(statusTokenRevoked, "the client token was removed", "token-removed")
	case !g.Allows(ns):
		c.closeWith(statusNotGranted, "the client token no longer grants this namespace", "namespace-not-granted")
	default:
		c.setReadOnly(g.ReadOnly)
	}
}

// CloseNamespace closes every editor connection of a namespace (1012, service restart):
// before a peer resets or drops the replica, which needs it unloaded. Editors reconnect
// and resync.
func (s *Server) CloseNamespace(ns string) {
	s.mu.Lock()
	rm := s.rooms[ns]
	s.mu.Unlock()
	if rm == nil {
		return
	}
	for _, c := range rm.members() {
		c.closeWith(websocket.StatusServiceRestart, "the namespace is being reset on this node; reconnect", "namespace-reset")
	}
	rm.waitEmpty(5 * time.Second)
}

// roomEditor is an editor of a room, with the room's namespace.
type roomEditor struct {
	ed editor
	ns string
}

// editors lists every editor of every room.
func (s *Server) editors() []roomEditor {
	s.mu.Lock()
	rooms := make([]*room, 0, len(s.rooms))
	for _, rm := range s.rooms {
		rooms = append(rooms, rm)
	}
	s.mu.Unlock()
	var out []roomEditor
	for _, rm := range rooms {
		for _, ed := range rm.members() {
			out = append(out, roomEditor{ed, rm.ns})
		}
	}
	return out
}

// Clients returns the number of open editor connections.
func (s *Server) Clients() int { return int(s.clients.Load()) }

// BroadcastStateless sends a stateless message to the editors of namespace ns on this
// node that take them — every Hocuspocus document, and the y-websocket connections that
// asked (?stateless=1) — and returns how many it was sent to. Nothing is stored: an editor
// not connected now never hears it, nor does one on another node.
func (s *Server) BroadcastStateless(ns, payload string) int {
	s.mu.Lock()
	rm := s.rooms[ns]
	s.mu.Unlock()
	if rm == nil {
		return 0
	}
	return rm.relayStateless(payload, nil)
}

// Editors counts the editors connected to namespace ns now (for the admin API's status).
func (s *Server) Editors(ns string) int {
	s.mu.Lock()
	rm := s.rooms[ns]
	s.mu.Unlock()
	if rm == nil {
		return 0
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return len(rm.conns)
}

// Shutdown refuses new connections, closes every editor connection (1001, going away:
// providers reconnect to the node when it is back) and waits, within ctx, for their
// handlers to finish and the namespaces to be released.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		close(s.shutdown)
	}
	s.mu.Unlock()
	for _, m := range s.editors() {
		m.ed.closeWith(websocket.StatusGoingAway, "the node is shutting down", "shutdown")
	}
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("editor connections still open: %w", ctx.Err())
	}
}
