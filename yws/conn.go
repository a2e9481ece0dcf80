package yws

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nomicore/nomicore/auth"
)

// Close statuses of their own (RFC 6455 private range). y-websocket 3.x does not reconnect
// after a status in 4400–4499, so these end an editor's attempts until the user acts.
const (
	statusTokenRevoked websocket.StatusCode = 4401 // the credential was removed, revoked or expired
	statusNotGranted   websocket.StatusCode = 4403 // the token no longer grants the namespace
	statusDeleted      websocket.StatusCode = 4404 // the namespace was deleted (docs/editors.md)
)

// conn is one editor connection. Its reader (run, on the HTTP handler's goroutine) owns the
// decoding, the writes and the gap table; its writer goroutine owns the socket's writes.
// Everything else reaches the socket through send, which never blocks: the outbox's queue
// is bounded and its overflow drops the connection (see outbox); the provider reconnects
// and resyncs.
type conn struct {
	srv      *Server
	room     *room
	ws       *websocket.Conn
	grant    auth.ClientGrant // as checked before the upgrade (its name is the logs'; RecheckClient takes it)
	remote   string
	started  time.Time
	readOnly atomic.Bool
	ctx      context.Context // cancelled once the socket is closed
	cancel   context.CancelFunc

	out        *outbox // what waits for the socket, and how it is to close
	writerDone chan struct{}

	msgsIn atomic.Int64

	stateless bool // stateless messages are relayed to it (it asked with ?stateless=1)

	// Owned by the reader.
	limits connLimits // its rate limits
	door   writeDoor  // its writes
	denied bool       // PermissionDenied was sent once
}

func newConn(s *Server, rm *room, ws *websocket.Conn, g auth.ClientGrant, remote string, stateless bool) *conn {
	c := &conn{srv: s, room: rm, ws: ws, grant: g, remote: remote, started: s.opts.Clock.Now(), stateless: stateless,
		out: newOutbox(), writerDone: make(chan struct{})}
	c.readOnly.Store(g.ReadOnly)
	c.limits = newConnLimits(&s.opts, c.started)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.door = newWriteDoor(s, rm, c, c.ctx, c.readOnly.Load)
	return c
}

// The editor methods of a y-websocket connection (see editor).
func (c *conn) credential() auth.ClientGrant { return c.grant }
func (c *conn) setReadOnly(ro bool)          { c.readOnly.Store(ro) }
func (c *conn) wantsSaved() bool             { return false } // y-websocket has no such message
func (c *conn) saved()                       {}
func (c *conn) takesStateless() bool         { return c.stateless }
func (c *conn) describe() Editor {
	return Editor{Name: c.grant.Name, User: c.grant.User, Credential: c.grant.Kind, ReadOnly: c.readOnly.Load(),
		Remote: c.remote, Since: c.started, Expires: c.grant.Expires}
}

// run serves the connection until it closes: greeting, then the read loop.
func (c *conn) run() {
	s := c.srv
	s.m.connected(1)
	go c.writer()
	if release, ok := c.holdUserPlace(); ok {
		c.serve()
		release()
	}
	s.leave(c.room, c)
	c.closeWith(websocket.StatusNormalClosure, "", "closed")
	<-c.writerDone
	s.m.connected(-1)
	code, cause := c.out.closedWith()
	s.m.closed(cause)
	s.log.Info("editor disconnected", slog.String("client", c.grant.Name), slog.String("namespaceId", c.room.ns),
		slog.String("reason", cause), slog.Int("closeStatus", int(code)),
		slog.Float64("connectedSeconds", s.opts.Clock.Now().Sub(c.started).Seconds()),
		slog.Int64("messagesIn", c.msgsIn.Load()), slog.Int64("messagesOut", c.out.written.Load()))
}

// serve joins the room, greets the editor and reads its messages until the connection
// ends.
func (c *conn) serve() {
	s := c.srv
	greeting := c.room.add(c)
	s.revalidate(c, c.room.ns) // a token removed or narrowed since the check before the upgrade
	defer s.closeAtExpiry(c)()
	if len(greeting) > 0 {
		c.send(AppendAwareness(nil, AppendAwarenessUpdate(nil, greeting)))
	}
	s.log.Info("editor connected", slog.String("client", c.grant.Name), slog.String("namespaceId", c.room.ns),
		slog.String("remote", c.remote), slog.Bool("readOnly", c.readOnly.Load()), slog.String("credential", c.grant.Kind))
	// The node's SyncStep1 (its state vector): the provider answers with what the node lacks.
	if sv, err := c.room.lease.StateVector(c.ctx); err != nil {
		c.closeWith(websocket.StatusInternalError, "the document cannot be read on this node now; reconnect", "internal")
	} else {
		c.send(AppendSync(nil, SyncStep1, sv))
		c.readLoop()
	}
}

// readLoop reads and handles messages until the socket fails or closes, or the editor
// goes over one of its limits.
func (c *conn) readLoop() {
	for {
		typ, b, err := c.ws.Read(c.ctx)
		if err != nil {
			c.readFailed(err)
			return
		}
		if !c.admitMessage(len(b)) {
			return
		}
		if typ != websocket.MessageBinary {
			c.badInput(websocket.StatusUnsupportedData, "text message", "y-websocket messages are binary")
			return
		}
		m, err := DecodeMessage(b)
		if err != nil {
			if errors.Is(err, ErrUnsupported) {
				c.badInput(websocket.StatusUnsupportedData, err.Error(), "unsupported message")
			} else {
				c.badInput(websocket.StatusInvalidFramePayloadData, err.Error(), "malformed message")
			}
			return
		}
		c.msgsIn.Add(1)
		c.srv.m.received(m.Name(), len(b))
		if !c.handle(m, b) {
			return
		}
	}
}

// readFailed records why the read loop ended.
func (c *conn) readFailed(err error) {
	switch {
	case websocket.CloseStatus(err) != -1:
		c.closeWith(websocket.CloseStatus(err), "", "client-closed")
	case strings.Contains(err.Error(), "read limited"):
		// The library has already closed the socket with 1009.
		c.srv.log.Warn("editor message too large; closed", slog.String("client", c.grant.Name),
			slog.String("namespaceId", c.room.ns), slog.Int("maxMessageBytes", c.srv.opts.MaxMessageBytes))
		c.closeWith(websocket.StatusMessageTooBig, "message too large", "message-too-large")
	default:
		c.closeWith(websocket.StatusAbnormalClosure, "", "connection-lost")
	}
}

// badInput closes the connection for a message it cannot take, with a log line.
func (c *conn) badInput(code websocket.StatusCode, detail, reason string) {
	c.srv.log.Warn("editor sent a bad message; closed", slog.String("client", c.grant.Name),
		slog.String("namespaceId", c.room.ns), slog.Int("closeStatus", int(code)), slog.String("error", detail))
	c.closeWith(code, reason, "bad-message")
}

// handle serves one message; false ends the connection.
func (c *conn) handle(m Message, raw []byte) bool {
	rm := c.room
	switch m.Type {
	case TypeSync:
		switch m.Sync {
		case SyncStep1:
			// Editors asking from the same state (a fresh editor: the empty state vector)
			// get the same encoded bytes while the document does not change.
			diff, err := rm.lease.EncodeState(c.ctx, m.Payload)
			if err != nil {
				return c.door.failed(err)
			}
			c.sendParts(AppendSyncHead(nil, SyncStep2, len(diff)), diff)
		default:
			v := c.door.write(m.Payload, raw, m.Sync == SyncStep2)
			if v.refused != "" {
				c.refused(v.refused, v.text)
			}
			return v.ok
		}
	case TypeAwareness:
		entries, err := DecodeAwareness(m.Payload, 2*c.srv.opts.MaxAwarenessStates+16, c.srv.opts.MaxAwarenessStateBytes)
		if err != nil {
			c.badInput(websocket.StatusInvalidFramePayloadData, err.Error(), "malformed awareness update")
			return false
		}
		if !c.admitAwareness(entries) {
			return false
		}
		if dropped := rm.applyAwareness(c, entries); dropped > 0 {
			c.srv.m.awarenessDropped(dropped)
		}
	case TypeQueryAwareness:
		c.send(rm.awarenessMessage())
	case TypeStateless:
		rm.relayStateless(m.Stateless, c)
	}
	return true
}

// refused tells the editor once per connection that an update was refused (auth
// PermissionDenied; the socket stays open). A drop of an update that builds on a refused
// one goes untold: the editor was told of the first.
func (c *conn) refused(reason, text string) {
	if reason == "after-refused" || c.denied {
		return
	}
	c.denied = true
	if reason == "read-only" {
		c.srv.log.Info("editor update refused: the client is read-only", slog.String("client", c.grant.Name),
			slog.String("namespaceId", c.room.ns))
	}
	c.send(AppendPermissionDenied(nil, text))
}

// send queues msg for the writer; it never blocks. When what already waits is at the
// queue's bounds the connection is dropped (the editor reconnects and resyncs); a message
// is taken whole otherwise. The first message waiting does not count against the bounds,
// so that a big document's SyncStep2 (larger than the bound) still goes out, and the small
// messages that come while it waits for the writer (awareness of other editors joining)
// do not drop the editor.
func (c *conn) send(msg []byte) { c.sendParts(nil, msg) }

// sendParts is send of one message made of head then body (see outMsg).
func (c *conn) sendParts(head, body []byte) {
	if !c.out.put(&c.srv.opts, head, body) {
		c.srv.log.Warn("editor too slow: its send queue is full; closed, it resyncs when it reconnects",
			slog.String("client", c.grant.Name), slog.String("namespaceId", c.room.ns))
		c.closeWith(websocket.StatusAbnormalClosure, "", "slow-client")
	}
}

// closeWith starts closing the connection with a status and a reason for the editor; the
// first call wins.
func (c *conn) closeWith(code websocket.StatusCode, reason, cause string) {
	c.out.close(code, reason, cause)
}

// writer writes the queued messages and the keep-alive, and closes the socket when the
// connection is closing (outbox.writeLoop).
func (c *conn) writer() {
	defer close(c.writerDone)
	defer c.cancel()
	c.out.writeLoop(c.ws, &c.srv.opts, c.srv.m, func() []byte { return keepAliveMessage })
}
