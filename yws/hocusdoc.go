package yws

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/yws/hocuspocus"
)

// hocusDoc is one document open on a Hocuspocus socket: an editor of its namespace's room,
// like a y-websocket connection, whose messages carry its address. Its socket's loop serves
// its frames; the room, the relay and the node's token checks reach it from their own
// goroutines through the editor methods.
type hocusDoc struct {
	sock     *hocusSocket
	room     *room
	addr     string
	admitted auth.ClientGrant // the grant it opened with (its user holds the socket's place)
	started  int64            // Unix nanoseconds
	ctx      context.Context  // cancelled when it closes (or its socket does)
	cancel   context.CancelFunc

	grant    atomic.Pointer[auth.ClientGrant] // the current one: a refresh replaces it
	readOnly atomic.Bool

	closeMu    sync.Mutex // guards closed and closeCause
	closed     bool
	closeCause string

	// Owned by the socket's loop.
	door       writeDoor
	stopExpiry func() // stops the close at its credential's expiry
}

func newHocusDoc(h *hocusSocket, rm *room, addr string, g auth.ClientGrant) *hocusDoc {
	d := &hocusDoc{sock: h, room: rm, addr: addr, admitted: g, started: h.srv.opts.Clock.Now().UnixNano()}
	d.grant.Store(&g)
	d.readOnly.Store(g.ReadOnly)
	d.ctx, d.cancel = context.WithCancel(h.ctx)
	d.door = newWriteDoor(h.srv, rm, d, d.ctx, d.readOnly.Load)
	return d
}

// The editor methods of a Hocuspocus document (see editor).

// send queues a message of the room for the provider, behind the document's address.
func (d *hocusDoc) send(msg []byte) {
	if d.isClosed() {
		return
	}
	d.sock.send(hocuspocus.AppendAddressed(make([]byte, 0, addressLen(d.addr)+len(msg)), d.addr, msg))
}

// sendParts sends a message of the document made of head and body, the body not copied
// (see hocusSocket.sendParts).
func (d *hocusDoc) sendParts(head, body []byte) {
	if d.isClosed() {
		return
	}
	d.sock.sendParts(hocuspocus.AppendAddressed(make([]byte, 0, addressLen(d.addr)+len(head)), d.addr, head), body)
}

func (d *hocusDoc) credential() auth.ClientGrant { return *d.grant.Load() }
func (d *hocusDoc) setReadOnly(ro bool)          { d.readOnly.Store(ro) }
func (d *hocusDoc) wantsSaved() bool             { return true }
func (d *hocusDoc) takesStateless() bool         { return true }
func (d *hocusDoc) describe() Editor {
	g := d.credential()
	return Editor{Name: g.Name, User: g.User, Credential: g.Kind, ReadOnly: d.readOnly.Load(), Remote: d.sock.remote,
		Since: time.Unix(0, d.started), Expires: g.Expires}
}

// saved tells the provider one of its updates is durable: SyncStatus 1, which takes one
// off its count of unsynced changes (hasUnsyncedChanges is false at none).
func (d *hocusDoc) saved() {
	if !d.isClosed() {
		d.sock.send(hocuspocus.AppendSyncStatus(nil, d.addr, true))
	}
}

// closeWith ends the document. A status that asks the provider to come back (the node is
// shutting down, cannot write now, reset or unloaded the namespace, failed) closes the
// whole socket: a provider opens its documents again only when its socket reconnects, and
// every document of the socket then resyncs, losing nothing. Any other — the document's
// input, one of its limits, its credential — closes the document alone with a CLOSE frame
// (the socket and its other documents go on), whose reason is Hocuspocus's for it.
func (d *hocusDoc) closeWith(code websocket.StatusCode, reason, cause string) {
	switch code {
	case websocket.StatusGoingAway, websocket.StatusTryAgainLater, websocket.StatusServiceRestart,
		websocket.StatusInternalError, websocket.StatusAbnormalClosure:
		d.sock.closeWith(code, reason, cause)
		return
	}
	d.closeMu.Lock()
	if d.closed {
		d.closeMu.Unlock()
		return
	}
	d.closed, d.closeCause = true, cause
	d.closeMu.Unlock()
	frameReason := closeReset
	switch code {
	case statusTokenRevoked:
		frameReason = closeUnauthorized
	case statusNotGranted:
		frameReason = closeForbidden
	case statusDeleted:
		frameReason = closeDeleted
	case websocket.StatusNormalClosure:
		frameReason = ""
	}
	if frameReason != "" {
		d.sock.send(hocuspocus.AppendClose(nil, d.addr, frameReason))
	}
	d.cancel()
	d.sock.docClosed(d)
}

func (d *hocusDoc) isClosed() bool {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	return d.closed
}

// open greets the provider once the document's token checked out: Authenticated with its
// scope, the awareness states of the room, then the frames held meanwhile, in order.
func (d *hocusDoc) open(held []socketFrame) {
	s := d.sock.srv
	greeting := d.room.add(d)
	scope := hocuspocus.ScopeReadWrite
	if d.readOnly.Load() {
		scope = hocuspocus.ScopeReadOnly
	}
	d.sock.send(hocuspocus.AppendAuthenticated(nil, d.addr, scope))
	s.revalidate(d, d.room.ns) // a token removed or narrowed since it was checked
	d.stopExpiry = s.closeAtExpiry(d)
	if len(greeting) > 0 {
		d.send(AppendAwareness(nil, AppendAwarenessUpdate(nil, greeting)))
	}
	s.log.Info("editor connected", slog.String("client", d.admitted.Name), slog.String("namespaceId", d.room.ns),
		slog.String("remote", d.sock.remote), slog.Bool("readOnly", d.readOnly.Load()), slog.String("endpoint", "hocuspocus"))
	for _, sf := range held {
		if d.isClosed() {
			return
		}
		d.serve(sf)
	}
}

// logClosed writes the document's disconnect line (its socket's loop released it).
func (d *hocusDoc) logClosed() {
	d.closeMu.Lock()
	cause := d.closeCause
	d.closeMu.Unlock()
	if cause == "" {
		cause = "socket-closed"
	}
	s := d.sock.srv
	s.log.Info("editor disconnected", slog.String("client", d.admitted.Name), slog.String("namespaceId", d.room.ns),
		slog.String("reason", cause), slog.String("endpoint", "hocuspocus"),
		slog.Float64("connectedSeconds", float64(s.opts.Clock.Now().UnixNano()-d.started)/1e9))
}

// serve serves one frame of the document.
func (d *hocusDoc) serve(sf socketFrame) {
	if d.isClosed() {
		return
	}
	f := sf.f
	rm := d.room
	switch f.Type {
	case hocuspocus.TypeSync, hocuspocus.TypeSyncReply:
		switch f.Sync {
		case hocuspocus.SyncStep1:
			// As Hocuspocus answers: the node's own SyncStep1 (the provider answers with what
			// the node lacks), then the SyncStep2 with what the provider lacks.
			sv, err := rm.lease.StateVector(d.ctx)
			if err != nil {
				d.door.failed(err)
				return
			}
			diff, err := rm.lease.EncodeState(d.ctx, f.Payload)
			if err != nil {
				d.door.failed(err)
				return
			}
			if f.Type == hocuspocus.TypeSync {
				d.send(AppendSync(nil, SyncStep1, sv))
			}
			// The reply's bytes are shared by every editor joining at this state: queued
			// behind their own head, not copied.
			d.sendParts(AppendSyncHead(nil, SyncStep2, len(diff)), diff)
		default:
			msg := sf.raw[addressLen(f.Address):]
			if f.Type == hocuspocus.TypeSyncReply {
				msg = AppendSync(nil, f.Sync, f.Payload)
			}
			v := d.door.write(f.Payload, msg, f.Sync == hocuspocus.SyncStep2)
			if v.ok && v.refused != "" {
				// Not applied: SyncStatus 0, as Hocuspocus answers a read-only editor's
				// change; the provider keeps counting it as unsynced.
				d.sock.send(hocuspocus.AppendSyncStatus(nil, d.addr, false))
			}
		}
	case hocuspocus.TypeAwareness:
		o := &d.sock.srv.opts
		entries, err := DecodeAwareness(f.Payload, 2*o.MaxAwarenessStates+16, o.MaxAwarenessStateBytes)
		if err != nil {
			d.badInput(err.Error())
			return
		}
		if limit, reason := d.sock.aware.chargeAwareness(o, entries); limit != "" {
			d.sock.overLimit(limit, reason)
			return
		}
		if dropped := rm.applyAwareness(d, entries); dropped > 0 {
			d.sock.srv.m.awarenessDropped(dropped)
		}
	case hocuspocus.TypeQueryAwareness:
		d.send(rm.awarenessMessage())
	case hocuspocus.TypeStateless:
		rm.relayStateless(f.Stateless, d)
	case hocuspocus.TypeClose:
		d.closeWith(websocket.StatusNormalClosure, "", "provider-closed")
	case hocuspocus.TypeAuth:
		// The provider sent its token again (a refresh): checked like the first one; the
		// document goes on meanwhile with the grant it has.
		d.sock.check(d.addr, f.Token, f.Version, d)
	}
}

// refreshed takes the answer of a refresh of the document's token: a grant that still
// covers the namespace replaces the one it had, and the provider hears its scope again;
// otherwise the provider hears why (onAuthenticationFailed) and the document closes
// ("Unauthorized").
func (d *hocusDoc) refreshed(a checkAnswer) {
	if d.isClosed() {
		return
	}
	if a.refusal != "" {
		d.sock.send(hocuspocus.AppendPermissionDenied(nil, d.addr, a.refusal))
		d.closeWith(statusTokenRevoked, a.refusal, "token-refused")
		return
	}
	g := a.grant
	d.grant.Store(&g)
	d.readOnly.Store(g.ReadOnly)
	if d.stopExpiry != nil {
		d.stopExpiry()
	}
	d.stopExpiry = d.sock.srv.closeAtExpiry(d) // the fresh token's expiry
	scope := hocuspocus.ScopeReadWrite
	if g.ReadOnly {
		scope = hocuspocus.ScopeReadOnly
	}
	d.sock.send(hocuspocus.AppendAuthenticated(nil, d.addr, scope))
}

// badInput closes the document for a message it cannot take, with a log line; the socket
// and its other documents go on.
func (d *hocusDoc) badInput(detail string) {
	d.sock.srv.log.Warn("editor sent a bad message; its document closed", slog.String("client", d.admitted.Name),
		slog.String("namespaceId", d.room.ns), slog.String("error", detail))
	d.closeWith(websocket.StatusInvalidFramePayloadData, "malformed message", "bad-message")
}
