package yws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/lib0"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/yws/hocuspocus"
)

// HocuspocusPath is the route of the Hocuspocus endpoint on the client listener: the URL a
// HocuspocusProvider (or HocuspocusProviderWebsocket) is given is ws://HOST:PORT + this.
const HocuspocusPath = "/v1/hocuspocus"

// HocuspocusOptions bound one Hocuspocus socket beyond the Limits every editor connection
// has. Zero fields take the defaults.
type HocuspocusOptions struct {
	// Timeout closes a socket (4408) that authenticated no document within it of opening,
	// or, once one authenticated, heard nothing from the provider for that long (as
	// Hocuspocus's own timeout). A 4.x provider answers the node's Ping, a 3.x one renews
	// its awareness every 15 s.
	Timeout time.Duration
	// AuthTimeout bounds one check of a document's token (the auth webhook may take time).
	AuthTimeout time.Duration
	// HeldBytes, HeldMessages and PendingDocuments bound what a socket's documents whose
	// authentication has not completed hold: the messages that came for them (bytes and
	// count, over all of them) and how many there are. Beyond any, the socket is closed
	// with 4205, as Hocuspocus does, and the close is counted by the limit's name
	// (hocuspocus-held-bytes, hocuspocus-held-messages, hocuspocus-pending-documents).
	HeldBytes, HeldMessages, PendingDocuments int
	// MaxDocuments bounds the documents open on one socket; a further one is refused
	// (PermissionDenied) and counted as hocuspocus-documents-per-socket.
	MaxDocuments int
}

// Defaults of HocuspocusOptions.
const (
	DefaultHocuspocusTimeout     = 60 * time.Second
	DefaultHocuspocusAuthTimeout = 10 * time.Second
	DefaultHeldBytes             = 8 << 20
	DefaultHeldMessages          = 1000
	DefaultPendingDocuments      = 100
	DefaultMaxDocumentsPerSocket = 256
)

func (o *HocuspocusOptions) fill() {
	if o.Timeout <= 0 {
		o.Timeout = DefaultHocuspocusTimeout
	}
	if o.AuthTimeout <= 0 {
		o.AuthTimeout = DefaultHocuspocusAuthTimeout
	}
	for _, f := range []struct {
		v *int
		d int
	}{{&o.HeldBytes, DefaultHeldBytes}, {&o.HeldMessages, DefaultHeldMessages}, {&o.PendingDocuments, DefaultPendingDocuments},
		{&o.MaxDocuments, DefaultMaxDocumentsPerSocket}} {
		if *f.v <= 0 {
			*f.v = f.d
		}
	}
}

// Close statuses of a Hocuspocus socket, as Hocuspocus uses them.
const (
	statusResetConnection   websocket.StatusCode = 4205 // held messages over a bound
	statusConnectionTimeout websocket.StatusCode = 4408 // nothing authenticated, or nothing heard, in time
)

// Reasons of a document's CLOSE frame (the socket stays open), as Hocuspocus writes them:
// the provider reports them with onClose.
const (
	closeUnauthorized = "Unauthorized"      // the credential was removed, or a refresh of it failed
	closeForbidden    = "Forbidden"         // the credential no longer grants the namespace
	closeReset        = "Reset Connection"  // the document's messages could not be taken
	closeDeleted      = "Namespace Deleted" // the namespace was deleted (our own: Hocuspocus deletes no document)
)

// GET /v1/hocuspocus: the Hocuspocus endpoint. Nothing is checked before the upgrade but
// the node's state and its connection bound: documents authenticate inside the socket.
func (s *Server) serveHocuspocus(w http.ResponseWriter, r *http.Request) {
	s.handlers.Add(1)
	defer s.handlers.Done()
	if s.isClosing() {
		writeError(w, http.StatusServiceUnavailable, "UNAVAILABLE", "the node is shutting down")
		return
	}
	presentedToken(r) // a token in the address is not used (documents authenticate in the socket) and must not be logged
	if s.clients.Add(1) > int64(s.opts.MaxClients) {
		s.clients.Add(-1)
		s.m.refusedConnect("too-many-clients")
		writeError(w, http.StatusServiceUnavailable, "TOO_MANY_CLIENTS",
			fmt.Sprintf("this node serves at most %d editor connections (--max-clients)", s.opts.MaxClients))
		return
	}
	defer s.clients.Add(-1)
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: s.opts.OriginPatterns,
		CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.log.Info("hocuspocus upgrade failed", slog.String("remote", r.RemoteAddr), slog.String("error", err.Error()))
		return
	}
	ws.SetReadLimit(int64(s.opts.MaxMessageBytes))
	newHocusSocket(s, ws, r.RemoteAddr).run()
}

// hocusSocket is one Hocuspocus WebSocket, carrying many documents: each authenticates on
// its own and is an editor of its namespace's room (hocusDoc). Three goroutines serve it:
// the reader reads frames and charges the socket's rates; the loop (on the HTTP handler's
// goroutine) owns the documents — it holds the frames of a document until its
// authentication completes, takes the answers of the checks, which run on goroutines of
// their own, and serves each frame, writes included, one at a time; the writer owns the
// socket's writes. Everything reaches the socket through send, which never blocks: its
// queue is bounded like a y-websocket connection's, and its overflow drops the socket.
type hocusSocket struct {
	srv     *Server
	ws      *websocket.Conn
	remote  string
	started time.Time
	ctx     context.Context // cancelled once the socket is closed
	cancel  context.CancelFunc

	out        *outbox       // what waits for the socket, and how it is to close
	mu         sync.Mutex    // guards closedDocs
	closedDocs []*hocusDoc   // documents closed from other goroutines, for the loop to release
	loopWake   chan struct{} // cap 1: closedDocs grew
	writerDone chan struct{}
	readerDone chan struct{}

	// Set by the loop, read by the writer: whether the provider answers Ping (a 4.x
	// provider announces its version), and an open document's address for the keep-alive
	// of one that does not.
	pings     atomic.Bool
	keepAlive atomic.Pointer[string]
	lastRead  atomic.Int64 // the reader's last frame, in Unix nanoseconds (Timeout)

	msgsIn atomic.Int64

	frames  chan socketFrame // reader → loop; unbuffered, so the reader waits for the loop
	answers chan checkAnswer // checks → loop
	limits  connLimits       // the reader's: messages and bytes per second
	aware   connLimits       // the loop's: awareness updates per second
	checks  sync.WaitGroup   // checks running
	readErr chan error       // cap 1: why the reader stopped

	// Owned by the loop.
	docs          map[string]*hocusDoc   // open documents by address
	pending       map[string]*pendingDoc // documents not open yet, by address (a refused one too, until its next token)
	heldBytes     int                    // over every pending document
	heldMessages  int
	users         map[string]int // open documents per user (each user with one holds a Limits.ConnectionsPerUser place)
	authenticated bool           // a document authenticated once (Timeout then counts from the last frame)
}

// socketFrame is a frame the reader read, decoded.
type socketFrame struct {
	f   hocuspocus.Frame
	raw []byte
	err error // a *hocuspocus.FrameError
}

// pendingDoc is a document whose frames are held until its authentication completes.
type pendingDoc struct {
	held     []socketFrame
	bytes    int
	checking bool // a check of its token runs
}

func newHocusSocket(s *Server, ws *websocket.Conn, remote string) *hocusSocket {
	now := s.opts.Clock.Now()
	h := &hocusSocket{srv: s, ws: ws, remote: remote, started: now,
		out: newOutbox(), loopWake: make(chan struct{}, 1), writerDone: make(chan struct{}), readerDone: make(chan struct{}),
		frames: make(chan socketFrame), answers: make(chan checkAnswer), readErr: make(chan error, 1),
		limits: newConnLimits(&s.opts, now), aware: newConnLimits(&s.opts, now),
		docs: map[string]*hocusDoc{}, pending: map[string]*pendingDoc{}, users: map[string]int{}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.lastRead.Store(now.UnixNano())
	return h
}

// run serves the socket until it closes.
func (h *hocusSocket) run() {
	s := h.srv
	s.m.connected(1)
	s.log.Info("hocuspocus socket connected", slog.String("remote", h.remote))
	go h.writer()
	go h.reader()
	h.loop()
	h.closeWith(websocket.StatusNormalClosure, "", "closed")
	for _, d := range h.docs {
		h.release(d)
	}
	h.checks.Wait()
	<-h.writerDone
	<-h.readerDone
	s.m.connected(-1)
	code, cause := h.out.closedWith()
	s.m.closed(cause)
	s.log.Info("hocuspocus socket disconnected", slog.String("remote", h.remote), slog.String("reason", cause),
		slog.Int("closeStatus", int(code)), slog.Float64("connectedSeconds", s.opts.Clock.Now().Sub(h.started).Seconds()),
		slog.Int64("messagesIn", h.msgsIn.Load()), slog.Int64("messagesOut", h.out.written.Load()))
}

// reader reads frames and hands them to the loop, until the socket fails or closes.
func (h *hocusSocket) reader() {
	defer close(h.readerDone)
	for {
		typ, b, err := h.ws.Read(h.ctx)
		if err != nil {
			h.readErr <- err
			return
		}
		h.lastRead.Store(h.srv.opts.Clock.Now().UnixNano())
		if limit, reason := h.limits.chargeMessage(&h.srv.opts, len(b)); limit != "" {
			h.overLimit(limit, reason)
			h.readErr <- nil
			return
		}
		if typ != websocket.MessageBinary {
			h.badInput(websocket.StatusUnsupportedData, "text message", "Hocuspocus frames are binary")
			h.readErr <- nil
			return
		}
		f, err := hocuspocus.ReadFrame(b)
		select {
		case h.frames <- socketFrame{f: f, raw: b, err: err}:
		case <-h.ctx.Done():
			h.readErr <- nil
			return
		}
	}
}

// loop serves the socket's documents until the socket closes.
func (h *hocusSocket) loop() {
	s := h.srv
	tick := clock.NewTicker(s.opts.Clock, max(time.Second, s.opts.Hocuspocus.Timeout/10))
	defer tick.Stop()
	for {
		select {
		case sf := <-h.frames:
			h.msgsIn.Add(1)
			s.m.received(sf.f.Name(), len(sf.raw))
			if !h.serveFrame(sf) {
				return
			}
		case a := <-h.answers:
			h.checked(a)
		case <-h.loopWake:
			h.releaseClosed()
		case err := <-h.readErr:
			if err != nil {
				h.readFailed(err)
			}
			return
		case <-tick.C:
			if !h.inTime() {
				return
			}
		case <-s.shutdown:
			h.closeWith(websocket.StatusGoingAway, "the node is shutting down", "shutdown")
			return
		case <-h.ctx.Done():
			return
		}
	}
}

// inTime closes the socket (4408) when it authenticated nothing within Timeout of opening,
// or heard nothing for Timeout since.
func (h *hocusSocket) inTime() bool {
	o := &h.srv.opts
	now := o.Clock.Now()
	from := h.started
	if h.authenticated {
		from = time.Unix(0, h.lastRead.Load())
	}
	if now.Sub(from) < o.Hocuspocus.Timeout {
		return true
	}
	what := "no document authenticated"
	if h.authenticated {
		what = "nothing heard from the provider"
	}
	h.srv.log.Info("hocuspocus socket timed out; closed", slog.String("remote", h.remote), slog.String("why", what),
		slog.Duration("timeout", o.Hocuspocus.Timeout))
	h.closeWith(statusConnectionTimeout, "Connection Timeout", "timeout")
	return false
}

// readFailed records why the reader stopped.
func (h *hocusSocket) readFailed(err error) {
	switch {
	case websocket.CloseStatus(err) != -1:
		h.closeWith(websocket.CloseStatus(err), "", "client-closed")
	case strings.Contains(err.Error(), "read limited"):
		// The library has already closed the socket with 1009.
		h.srv.log.Warn("hocuspocus message too large; closed", slog.String("remote", h.remote),
			slog.Int("maxMessageBytes", h.srv.opts.MaxMessageBytes))
		h.closeWith(websocket.StatusMessageTooBig, "Message Too Big", "message-too-large")
	default:
		h.closeWith(websocket.StatusAbnormalClosure, "", "connection-lost")
	}
}

// serveFrame serves one frame; false ends the socket.
func (h *hocusSocket) serveFrame(sf socketFrame) bool {
	f := sf.f
	switch {
	case sf.err != nil:
		var fe *hocuspocus.FrameError
		if !errors.As(sf.err, &fe) || !fe.HasAddress {
			h.badInput(websocket.StatusInvalidFramePayloadData, sf.err.Error(), "malformed frame")
			return false
		}
		if d := h.doc(fe.Address); d != nil {
			d.badInput(sf.err.Error())
			return true
		}
		h.dropPending(fe.Address)
		h.srv.log.Warn("editor sent a bad message; its document closed", slog.String("remote", h.remote),
			slog.String("namespaceId", hocuspocus.Document(fe.Address)), slog.String("error", sf.err.Error()))
		h.send(hocuspocus.AppendClose(nil, fe.Address, closeReset))
		return true
	case f.Ping:
		h.send(hocuspocus.Pong)
		return true
	case f.Pong:
		return true
	}
	if d := h.doc(f.Address); d != nil {
		d.serve(sf)
		return true
	}
	if f.Type == hocuspocus.TypeClose {
		h.dropPending(f.Address)
		return true
	}
	return h.hold(sf)
}

// doc returns the open document of an address (as the provider wrote it: a 4.x provider's
// session address and the plain document name are different documents of the socket).
func (h *hocusSocket) doc(addr string) *hocusDoc { return h.docs[addr] }

// hold keeps a frame of a document that is not open, and starts the check of its token
// when it is one. Going over a bound of what pending documents hold closes the socket
// (4205); false then.
func (h *hocusSocket) hold(sf socketFrame) bool {
	o := &h.srv.opts.Hocuspocus
	addr := sf.f.Address
	p := h.pending[addr]
	if p == nil {
		if len(h.pending) >= o.PendingDocuments {
			return h.heldTooMuch(limitPendingDocuments, fmt.Sprintf("more than %d documents waiting for their authentication", o.PendingDocuments))
		}
		p = &pendingDoc{}
		h.pending[addr] = p
	}
	if sf.f.Type == hocuspocus.TypeAuth && !p.checking {
		p.checking = true
		h.check(addr, sf.f.Token, sf.f.Version, nil)
		return true
	}
	switch {
	case h.heldBytes+len(sf.raw) > o.HeldBytes:
		return h.heldTooMuch(limitHeldBytes, fmt.Sprintf("more than %d bytes held for documents waiting for their authentication", o.HeldBytes))
	case h.heldMessages+1 > o.HeldMessages:
		return h.heldTooMuch(limitHeldMessages, fmt.Sprintf("more than %d messages held for documents waiting for their authentication", o.HeldMessages))
	}
	p.held = append(p.held, sf)
	p.bytes += len(sf.raw)
	h.heldBytes += len(sf.raw)
	h.heldMessages++
	return true
}

// heldTooMuch closes the socket (4205, Hocuspocus's Reset Connection) for going over one of
// the bounds of what documents waiting for their authentication hold; counted and logged
// by the limit's name.
func (h *hocusSocket) heldTooMuch(limit, why string) bool {
	h.srv.m.limitClosed(limit)
	h.srv.log.Warn("hocuspocus socket held too much before authentication; closed", slog.String("remote", h.remote),
		slog.String("limit", limit), slog.String("reason", why))
	h.closeWith(statusResetConnection, "Reset Connection", "over-limit")
	return false
}

// dropPending forgets a pending document and what it holds (a check of its token that is
// still running finds it gone).
func (h *hocusSocket) dropPending(addr string) {
	if p := h.pending[addr]; p != nil {
		h.heldBytes -= p.bytes
		h.heldMessages -= len(p.held)
		delete(h.pending, addr)
	}
}

// checkAnswer is the answer of one check of a document's token: the grant and the joined
// room, or why not (refusal, the PermissionDenied reason; cause, the metric's).
type checkAnswer struct {
	addr    string
	version string
	refresh *hocusDoc // a refresh of an open document's token, or nil for a new document
	grant   auth.ClientGrant
	owner   string
	rm      *room
	refusal string
	cause   string
}

// check checks a document's token on a goroutine of its own (the credential check may wait
// on the network; the socket's other documents go on meanwhile), and, for a new document,
// joins its namespace's room; the answer goes to the loop.
func (h *hocusSocket) check(addr, token, version string, refresh *hocusDoc) {
	h.checks.Add(1)
	go func() {
		defer h.checks.Done()
		ctx, cancel := context.WithTimeout(h.ctx, h.srv.opts.Hocuspocus.AuthTimeout)
		defer cancel()
		a := h.srv.checkDocument(ctx, hocuspocus.Document(addr), token, h.remote, refresh == nil)
		a.addr, a.version, a.refresh = addr, version, refresh
		select {
		case h.answers <- a:
		case <-h.ctx.Done():
			if a.rm != nil {
				h.srv.leave(a.rm, nil)
			}
		}
	}()
}

// checkDocument checks a token for namespace ns as the y-websocket endpoint checks one
// before its upgrade, and joins the namespace's room when join is set.
func (s *Server) checkDocument(ctx context.Context, ns, token, remote string, join bool) checkAnswer {
	refuse := func(cause, reason string) checkAnswer {
		s.m.refusedConnect(cause)
		return checkAnswer{refusal: reason, cause: cause}
	}
	grant := auth.ClientGrant{Name: "anonymous", Namespaces: []string{auth.AllNamespaces}}
	if s.opts.Clients != nil {
		if token == "" {
			return refuse("missing-token", "a client token is required: give the provider a token; create one with `hub token add --client NAME` (or `peer token add`), or have the application sign one")
		}
		g, err := s.opts.Clients.AuthenticateClient(ctx, auth.ClientCredential{Token: token, NamespaceID: ns, RemoteAddr: remote})
		var refusal *auth.ClientRefusal
		var unavailable *auth.UnavailableError
		switch {
		case errors.As(err, &refusal):
			s.log.Debug("editor document refused", slog.String("namespaceId", ns), slog.String("remote", remote),
				slog.String("check", refusal.Check))
			return refuse(refusal.Check, refusal.Reason)
		case errors.Is(err, auth.ErrUnauthenticated):
			return refuse(auth.CheckUnknownToken, "the client token is not known to this node")
		case errors.As(err, &unavailable):
			s.log.Warn("editor document refused: the credential cannot be checked now", slog.String("namespaceId", ns),
				slog.String("error", err.Error()))
			return refuse("auth-unavailable", unavailable.What+"; retry shortly")
		case err != nil:
			s.log.Warn("editor document refused: the client token cannot be checked", slog.String("namespaceId", ns),
				slog.String("error", err.Error()))
			return refuse("auth-unavailable", "the client token cannot be checked now; retry shortly")
		}
		grant = g
	}
	if !validNamespaceID(ns) {
		return refuse("unknown-namespace", "not a namespace id (ns- and 32 hex digits): the document name is the namespace id")
	}
	if !grant.Allows(ns) {
		return refuse("namespace-not-granted", "the credential does not grant this namespace")
	}
	if !join {
		return checkAnswer{grant: grant}
	}
	owner, err := s.opts.Namespaces(ctx, ns)
	switch {
	case errors.Is(err, ErrNamespaceDeleted):
		return refuse("deleted-namespace", "the namespace was deleted")
	case errors.Is(err, ErrUnknownNamespace):
		return refuse("unknown-namespace", "this node does not serve the namespace")
	case errors.Is(err, ErrNotReady):
		return refuse("not-ready", "the namespace is not bootstrapped on this node yet; retry shortly")
	case errors.Is(err, ErrConflicted):
		return refuse("conflicted", ErrConflicted.Error())
	case errors.Is(err, ErrReplicaFailed):
		return refuse("replica-failed", err.Error())
	case err != nil:
		return refuse("internal", "the namespace cannot be looked up")
	}
	rm, err := s.join(ctx, ns, owner)
	switch {
	case errors.Is(err, registry.ErrDeleted):
		return refuse("deleted-namespace", "the namespace was deleted")
	case errors.Is(err, errClosing):
		return refuse("shutdown", "the node is shutting down")
	case err != nil:
		s.log.Warn("editor document refused: the namespace cannot be opened", slog.String("client", grant.Name),
			slog.String("namespaceId", ns), slog.String("error", err.Error()))
		return refuse("not-ready", "the namespace cannot be opened on this node now; retry shortly")
	}
	return checkAnswer{grant: grant, owner: owner, rm: rm}
}

// checked takes the answer of a check.
func (h *hocusSocket) checked(a checkAnswer) {
	if a.refresh != nil {
		a.refresh.refreshed(a)
		return
	}
	p := h.pending[a.addr]
	if p == nil || h.docs[a.addr] != nil { // closed meanwhile
		if a.rm != nil {
			h.srv.leave(a.rm, nil)
		}
		return
	}
	p.checking = false
	o := &h.srv.opts
	if a.refusal == "" && len(h.docs) >= o.Hocuspocus.MaxDocuments {
		a.refusal, a.cause = fmt.Sprintf("too many documents on one connection: at most %d (%s)", o.Hocuspocus.MaxDocuments, limitDocumentsPerSocket), limitDocumentsPerSocket
		h.srv.m.limitClosed(limitDocumentsPerSocket)
	}
	if a.refusal == "" && o.Clients != nil && h.users[userKey(a.grant)] == 0 &&
		!h.srv.users.acquire(userKey(a.grant), o.Limits.ConnectionsPerUser) {
		h.srv.m.limitClosed(limitConnectionsPerUser)
		h.srv.log.Warn("editor over a limit; its document refused", slog.String("client", a.grant.Name), slog.String("user", userKey(a.grant)),
			slog.String("namespaceId", hocuspocus.Document(a.addr)), slog.String("limit", limitConnectionsPerUser))
		a.refusal, a.cause = fmt.Sprintf("too many connections: at most %d per user", o.Limits.ConnectionsPerUser), limitConnectionsPerUser
	}
	if a.refusal != "" {
		// The document stays pending with what it holds (its SyncStep1, the changes made
		// meanwhile): a provider tries again by sending a token (sendToken), and only then
		// would they be served. Within the bounds of what pending documents hold.
		if a.rm != nil {
			h.srv.leave(a.rm, nil)
		}
		h.srv.log.Info("editor document refused", slog.String("remote", h.remote), slog.String("namespaceId", hocuspocus.Document(a.addr)),
			slog.String("reason", a.cause))
		h.send(hocuspocus.AppendPermissionDenied(nil, a.addr, a.refusal))
		return
	}
	h.dropPending(a.addr)
	if o.Clients != nil {
		h.users[userKey(a.grant)]++
	}
	if a.version != "" {
		h.pings.Store(true)
	}
	h.authenticated = true
	d := newHocusDoc(h, a.rm, a.addr, a.grant)
	h.docs[a.addr] = d
	h.keepAlive.Store(&d.addr)
	d.open(p.held)
}

// releaseClosed releases the documents closed from other goroutines.
func (h *hocusSocket) releaseClosed() {
	h.mu.Lock()
	closed := h.closedDocs
	h.closedDocs = nil
	h.mu.Unlock()
	for _, d := range closed {
		if h.docs[d.addr] == d {
			h.release(d)
		}
	}
}

// release takes a closed document off the socket: out of its room (its awareness states
// removed), its user's place given back.
func (h *hocusSocket) release(d *hocusDoc) {
	delete(h.docs, d.addr)
	d.cancel()
	if d.stopExpiry != nil {
		d.stopExpiry()
	}
	h.srv.leave(d.room, d)
	if h.srv.opts.Clients != nil {
		user := userKey(d.admitted)
		if h.users[user]--; h.users[user] <= 0 {
			delete(h.users, user)
			h.srv.users.release(user)
		}
	}
	if p := h.keepAlive.Load(); p != nil && *p == d.addr {
		h.keepAlive.Store(nil)
		for _, other := range h.docs {
			h.keepAlive.Store(&other.addr)
			break
		}
	}
	d.logClosed()
}

// badInput closes the socket for a frame it cannot take, with a log line.
func (h *hocusSocket) badInput(code websocket.StatusCode, detail, reason string) {
	h.srv.log.Warn("hocuspocus socket sent a bad message; closed", slog.String("remote", h.remote),
		slog.Int("closeStatus", int(code)), slog.String("error", detail))
	h.closeWith(code, reason, "bad-message")
}

// overLimit closes the socket for going over one of the Limits: 1008 with reason, counted
// and logged.
func (h *hocusSocket) overLimit(limit, reason string) {
	h.srv.m.limitClosed(limit)
	h.srv.log.Warn("hocuspocus socket over a limit; closed", slog.String("remote", h.remote),
		slog.String("limit", limit), slog.String("reason", reason))
	h.closeWith(websocket.StatusPolicyViolation, reason, "over-limit")
}

// send queues a frame for the writer; it never blocks.
func (h *hocusSocket) send(frame []byte) { h.sendParts(nil, frame) }

// sendParts queues a frame made of head and body, the body not copied (a document's
// encoding shared by every editor that joins at its state); it never blocks. When what
// already waits is at the queue's bounds the socket is dropped (the provider reconnects and
// resyncs every document; see outbox).
func (h *hocusSocket) sendParts(head, body []byte) {
	if !h.out.put(&h.srv.opts, head, body) {
		h.srv.log.Warn("hocuspocus socket too slow: its send queue is full; closed, it resyncs when it reconnects",
			slog.String("remote", h.remote))
		h.closeWith(websocket.StatusAbnormalClosure, "", "slow-client")
	}
}

// closeWith starts closing the socket with a status and a reason; the first call wins.
func (h *hocusSocket) closeWith(code websocket.StatusCode, reason, cause string) {
	h.out.close(code, reason, cause)
}

// docClosed hands a document closed on another goroutine to the loop.
func (h *hocusSocket) docClosed(d *hocusDoc) {
	h.mu.Lock()
	h.closedDocs = append(h.closedDocs, d)
	h.mu.Unlock()
	signal(h.loopWake)
}

// writer writes the queued frames and, when nothing went out for KeepAlive, a Ping to a
// provider that answers one (4.x) or an empty awareness update of an open document to one
// that does not (a provider reconnects after 30 s of silence); it closes the socket when
// closing (outbox.writeLoop).
func (h *hocusSocket) writer() {
	defer close(h.writerDone)
	defer h.cancel()
	h.out.writeLoop(h.ws, &h.srv.opts, h.srv.m, h.keepAliveFrame)
}

// keepAliveFrame is the frame that keeps a quiet socket alive, or nil when it has none.
func (h *hocusSocket) keepAliveFrame() []byte {
	if h.pings.Load() {
		return hocuspocus.Ping
	}
	if addr := h.keepAlive.Load(); addr != nil {
		return hocuspocus.AppendAwareness(nil, *addr, []byte{0})
	}
	return nil
}

// addressLen is the length of a frame's address field (its varString).
func addressLen(addr string) int { return lib0.VarUintLen(uint64(len(addr))) + len(addr) }
