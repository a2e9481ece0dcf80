package ws

import (
	"errors"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// readLoop is the reader goroutine: it reads whole messages, never more than maxFrameBytes
// into memory, and hands them to the owner through the bounded inbound channel, so that an
// owner that falls behind stops the reading and TCP pushes back on the remote. Before the
// handshake completes it reads at most HELLO and maxEarlyFrames more
// (docs/protocol.md#transport-and-authentication).
func (c *conn) readLoop() {
	defer c.post(func() { c.readerDone = true })
	early := 0
	for {
		msg, err := c.t.Read(c.ioCtx, c.cfg.MaxFrameBytes)
		if err == nil {
			c.progress.Add(int64(len(msg)))
			if tap := c.tap; tap != nil {
				tap(c.tapConnectionID(), false, msg)
			}
			if !c.admitted.Load() {
				if early++; early > 1+c.cfg.MaxEarlyFrames {
					err = errEarlyFrames
				}
			}
		}
		select {
		case c.inbound <- inboundMsg{msg, err}:
			c.kick()
		case <-c.stopRead:
			return
		}
		if err != nil {
			return
		}
	}
}

var errEarlyFrames = errors.New("ws: early frame limit")

// handleInbound decodes one message on the owner goroutine. A frame over a namespace size
// cap fails its namespace (HandleRejected); every other decoding error closes the
// connection.
func (c *conn) handleInbound(m inboundMsg) {
	if c.closing {
		return
	}
	if m.err != nil {
		c.readFailed(m.err)
		return
	}
	f, err := c.in.Decode(m.msg)
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			pe = &protocol.Error{Code: protocol.CodeInternalError, Scope: protocol.ScopeConnection, Err: err}
		}
		if pe.Scope == protocol.ScopeNamespace && c.handler != nil {
			c.handler.HandleRejected(pe)
			return
		}
		if pe.Scope == protocol.ScopeNamespace {
			// A namespace frame before the handshake completed.
			pe = &protocol.Error{Code: protocol.CodeHelloRequired, Scope: protocol.ScopeConnection, Type: pe.Type, Sequence: pe.Sequence, HasHeader: true}
		}
		c.fail(pe)
		return
	}
	c.dispatch(f)
}

// readFailed classifies a transport read error.
func (c *conn) readFailed(err error) {
	var tooLarge *MessageTooLargeError
	switch {
	case errors.Is(err, errEarlyFrames):
		c.rejectAdmission(observer.AuthEarlyFrameLimit)
		c.failWith(&protocol.Error{Code: protocol.CodeConnectionPolicyViolation, Scope: protocol.ScopeConnection, Detail: "more early frames than maxEarlyFrames"}, seam.CauseEarlyFrames)
	case errors.As(err, &tooLarge):
		c.rejectAdmission(observer.AuthFrameTooLarge)
		c.failWith(&protocol.Error{Code: protocol.CodeFrameTooLarge, Scope: protocol.ScopeConnection, Detail: tooLarge.Error()}, seam.CauseFrameTooLarge)
	case errors.Is(err, ErrTextMessage):
		c.fail(&protocol.Error{Code: protocol.CodeMalformedFrame, Scope: protocol.ScopeConnection, Detail: "text message"})
	default:
		c.rejectAdmission(observer.AuthPeerDisconnected)
		info := seam.CloseInfo{Code: protocol.CloseAbnormal, Cause: seam.CauseTransport, Remote: true}
		if code, ok := RemoteCloseCode(err); ok {
			info.Code, info.Cause = code, seam.CauseRemoteClose
			if c.info.Error != "" { // the remote's ERROR frame came first
				info.Error = c.info.Error
			}
		}
		c.closeNow(0, info)
	}
}

// rejectAdmission reports a connection the hub refused before its handshake completed, as
// auth-upgrade-rejected (docs/protocol.md#events): it never had a connection id.
func (c *conn) rejectAdmission(r observer.AuthRejectReason) {
	if c.side == observer.SideHub && !c.admitted.Load() && c.onUpgrade != nil {
		c.onUpgrade(r)
	}
}

// dispatch routes a decoded frame by its message rule: a frame the remote may not send is
// refused, a connection frame is handled here, and a namespace frame — once the handshake
// is complete and its acknowledgement, if it is one, checked — goes on to the namespace
// layer.
func (c *conn) dispatch(f protocol.Frame) {
	if !f.Type().Rule().Direction.SentBy(c.local.Remote()) {
		c.fail(frameErr(protocol.CodeUnsupportedMessageType, f, "this message type may not be sent in this direction"))
		return
	}
	if protocol.ScopeOf(f.Message) == protocol.ScopeConnection {
		c.handleConnectionFrame(f)
		return
	}
	if c.state == stHandshaking {
		c.fail(frameErr(protocol.CodeHelloRequired, f, "a namespace message came before the handshake finished (HELLO_ACK)"))
		return
	}
	if !c.checkAck(f) {
		return
	}
	c.deliver(f)
}

// handleConnectionFrame handles the frames of the connection itself: the handshake, GOAWAY
// and a connection ERROR.
func (c *conn) handleConnectionFrame(f protocol.Frame) {
	switch m := f.Message.(type) {
	case *protocol.Hello:
		if c.state != stHandshaking {
			c.fail(frameErr(protocol.CodeUnsupportedMessageType, f, "second HELLO"))
			return
		}
		c.answerHello(f, m)
	case *protocol.HelloAck:
		if c.state != stHandshaking {
			c.fail(frameErr(protocol.CodeUnsupportedMessageType, f, "second HELLO_ACK"))
			return
		}
		c.acceptHelloAck(m)
	case *protocol.GoAway:
		c.goAwayReceived(m)
	case *protocol.ErrorMessage:
		c.remoteError(m)
	}
}

// frameErr is a connection error about frame f, which its ERROR names as relatedSequence.
func frameErr(code protocol.ErrorCode, f protocol.Frame, detail string) *protocol.Error {
	return &protocol.Error{Code: code, Scope: protocol.ScopeConnection, Type: f.Type(), Sequence: f.Sequence, HasHeader: true, Detail: detail}
}

// deliver passes a namespace frame to the handler through the drain filter (a draining
// connection takes nothing that starts work) and, on the hub, OPEN admission.
func (c *conn) deliver(f protocol.Frame) {
	if c.state == stDraining && f.Type().Rule().StartsWork {
		c.drainDrop(f)
		return
	}
	if c.side == observer.SideHub {
		if !c.opens.admit(c, f) {
			return
		}
	}
	c.handler.HandleFrame(f)
}

// drainDrop handles a frame that would start work on a draining connection
// (docs/protocol.md#draining): an OPEN_NAMESPACE gets NAMESPACE_REOPEN_REQUIRES_RECONNECT on
// the hub, except in a REAUTH_REQUIRED drain, where it is dropped silently like every other
// such frame.
func (c *conn) drainDrop(f protocol.Frame) {
	open, ok := f.Message.(*protocol.OpenNamespace)
	if !ok || c.side != observer.SideHub || c.drain.ReasonCode == protocol.GoAwayReauthRequired {
		return
	}
	m, err := protocol.NewErrorMessage(protocol.ScopeNamespace, protocol.CodeNamespaceReopenRequiresReconnect, open.NamespaceID, "namespace open refused while the connection drains")
	if err == nil {
		// Best effort: a send that fails has closed the connection, which ends the drain too.
		_, _ = c.sendControl(m.WithRelatedSequence(f.Sequence))
	}
}

// remoteError handles a connection ERROR from the remote (docs/protocol.md#handling-errors):
// the remote is closing the connection, and this side closes too, with the code the error
// registry gives, without answering.
func (c *conn) remoteError(m *protocol.ErrorMessage) {
	code := protocol.CloseInternal
	if spec, ok := m.Spec(); ok {
		code = spec.Close
	}
	c.info.Error = m.Code
	c.closeNow(code, seam.CloseInfo{Code: code, Error: m.Code, Remote: true, Cause: seam.CauseRemoteClose})
}
