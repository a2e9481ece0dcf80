package ws

import (
	"errors"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// This file is the handshake (docs/protocol.md#handshake): the peer sends HELLO, the hub
// checks identities and versions and answers HELLO_ACK, and both sides become ready, within
// helloTimeoutMs.

// begin runs first on the owner goroutine: the handshake timer, and the peer's HELLO.
func (c *conn) begin() {
	c.helloTimer = c.after(c.cfg.HelloTimeout, func() {
		c.failWith(&protocol.Error{Code: protocol.CodeHelloTimeout, Scope: protocol.ScopeConnection, Detail: "no handshake within helloTimeoutMs"}, seam.CauseHelloTimeout)
	})
	if c.side == observer.SidePeer {
		if _, err := c.sendControl(c.peerHandshake().Hello()); err != nil && !errors.Is(err, seam.ErrClosed) {
			c.fail(&protocol.Error{Code: protocol.CodeInternalError, Scope: protocol.ScopeConnection, Detail: "HELLO: " + err.Error()})
		}
	}
}

// peerHandshake is the peer's side of the handshake: its HELLO and the check of HELLO_ACK.
func (c *conn) peerHandshake() *protocol.PeerHandshake {
	return &protocol.PeerHandshake{PeerInstanceID: c.peerID, HubInstanceID: c.hubID, Nonce: c.nonce, Offer: c.cfg.Offer()}
}

// answerHello checks the peer's HELLO against the identity the authenticator vouched for and
// this hub's offer, and answers HELLO_ACK, or fails the connection with the error the check
// names.
func (c *conn) answerHello(f protocol.Frame, h *protocol.Hello) {
	hs := &protocol.HubHandshake{HubInstanceID: c.hubID, PeerInstanceID: c.peerID, ConnectionID: c.connID, Offer: c.cfg.Offer()}
	ack, n, err := hs.Answer(h)
	if err != nil {
		pe := asConnectionError(err)
		pe.Type, pe.Sequence, pe.HasHeader = f.Type(), f.Sequence, true
		c.fail(pe)
		return
	}
	c.negotiated = n
	if _, err := c.sendControl(ack); err != nil {
		if !errors.Is(err, seam.ErrClosed) {
			c.fail(&protocol.Error{Code: protocol.CodeInternalError, Scope: protocol.ScopeConnection, Detail: "HELLO_ACK: " + err.Error()})
		}
		return
	}
	c.becomeReady()
}

// acceptHelloAck checks the hub's answer against the peer's HELLO.
func (c *conn) acceptHelloAck(a *protocol.HelloAck) {
	n, err := c.peerHandshake().CheckAck(a)
	if err != nil {
		c.fail(asConnectionError(err))
		return
	}
	c.negotiated = n
	c.connID = a.ConnectionID
	c.publishConnID()
	c.becomeReady()
}

// asConnectionError returns the *protocol.Error in err's chain, or an INTERNAL_ERROR wrapping
// err when there is none, so that a connection failure always has a registry code.
func asConnectionError(err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe
	}
	return &protocol.Error{Code: protocol.CodeInternalError, Scope: protocol.ScopeConnection, Err: err}
}

// becomeReady completes the handshake: the negotiated capabilities take effect, the
// namespace layer is created and liveness starts.
func (c *conn) becomeReady() {
	c.helloTimer.Stop()
	c.in.SetCapabilities(c.negotiated.Capabilities)
	c.out.SetCapabilities(c.negotiated.Capabilities)
	c.admitted.Store(true)
	c.info.Handshook = true
	c.setState(stReady)
	c.session = session{c: c}
	c.handler = c.factory(c.session)
	if c.handler == nil {
		c.handler = nopHandler{}
	}
	c.pinger.arm()
	if c.onReady != nil {
		c.onReady(c)
	}
}

// nopHandler stands in when a factory returns nil: frames are ignored.
type nopHandler struct{}

func (nopHandler) HandleFrame(protocol.Frame)                     {}
func (nopHandler) HandleRejected(*protocol.Error)                 {}
func (nopHandler) HandleDrain(seam.Drain)                         {}
func (nopHandler) HandleShed(protocol.NamespaceID, seam.ShedInfo) {}
func (nopHandler) HandleRevoked(auth.PeerRevocation)              {}
func (nopHandler) HandleClosed(seam.CloseInfo)                    {}
