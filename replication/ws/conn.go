package ws

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/internal/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// connState is the state of one connection (§15.2 for the hub; the handshaking, ready and
// draining part of §15.1 for the peer, whose controller owns the rest).
type connState uint8

const (
	stUpgraded    connState = iota // the transport exists; goroutines not started
	stHandshaking                  // waiting for HELLO (hub) or HELLO_ACK (peer)
	stReady
	stDraining
	stClosed
)

var connStateNames = [...]observer.ConnectionState{
	stHandshaking: observer.ConnHandshaking,
	stReady:       observer.ConnReady,
	stDraining:    observer.ConnDraining,
	stClosed:      observer.ConnClosed,
}

// inboundQueue is the capacity of the reader→owner channel. When it is full the reader stops
// reading, and TCP pushes back on the remote.
const inboundQueue = 16

// connParams is everything a connection needs from its hub or peer.
type connParams struct {
	side      observer.Side
	cfg       *protocol.Config
	clock     clock.Clock
	em        *observer.Emitter
	log       *slog.Logger
	t         Transport
	factory   seam.NamespaceFactory
	auth      Authenticator // hub only
	peerID    string        // hub: trusted upgrade identity; peer: this instance
	hubID     string
	connID    string   // hub: generated; peer: learnt from HELLO_ACK
	nonce     [16]byte // peer: HELLO connectionNonce
	work      *counter
	onReady   func(*conn)                 // owner goroutine; must not block
	onClosed  func(*conn, seam.CloseInfo) // owner goroutine; must not block
	onExit    func(*conn)                 // after every goroutine of the connection exited
	onGoAway  func(*conn, seam.Drain)     // peer: GOAWAY received (owner goroutine)
	onUpgrade func(observer.AuthRejectReason)
}

// conn is one connection. Every field below "owned by the owner goroutine" is read and
// written only by run and the functions it calls (handlers, posted functions, timers).
type conn struct {
	connParams
	local protocol.Endpoint // this end: the hub or the peer

	inbound  chan inboundMsg // reader → owner
	stopRead chan struct{}   // closed at the close decision: the reader stops posting
	done     chan struct{}   // closed when the owner goroutine exits
	ioCtx    context.Context // reads and pings; cancelled when the connection is gone
	ioCancel context.CancelFunc
	wctx     context.Context // writes; cancelled by an aborting close or the close timer
	wcancel  context.CancelFunc
	admitted atomic.Bool // handshake done: the reader stops counting early frames
	pubState atomic.Uint32

	box mailbox // functions posted to the owner goroutine

	w writer

	// Owned by the owner goroutine.
	state      connState
	closing    bool
	exited     bool
	in         *protocol.Inbound
	out        *protocol.Outbound
	negotiated protocol.Negotiated
	handler    seam.Handler
	session    session
	timers     map[*timer]struct{}
	helloTimer *timer
	drainTimer *timer
	closeTimer clock.Timer
	drain      *seam.Drain
	goAwayRecv *seam.Drain
	info       seam.CloseInfo
	readerDone bool
	writerDone bool
	pinger     liveness
	deferred   []func()
	opens      openAdmission
	awaiting   map[uint32]ackKey // frames sent that expect an ACK (§10.2)
	late       map[uint32]ackKey // given up by this side, still acceptable once (see forgetOnTerminal)
	lateOrder  []uint32          // late's sequences, oldest first: bounds late to maxLateAcks
	sched      scheduler
	queues     map[protocol.NamespaceID]*nsQueue
	tids       protocol.TransferIDs
	inFlight   int // entries of awaiting acknowledged by UPDATE_ACK: live UPDATEs in flight

	// Published by the owner goroutine after every event, for Hub.Load and Peer.Load.
	pubQueued, pubInFlight atomic.Int64
}

type inboundMsg struct {
	msg []byte
	err error
}

// ackKey is what a frame awaiting its acknowledgement must be acknowledged with.
type ackKey struct {
	ns  protocol.NamespaceID
	ack protocol.MessageType
}

func newConn(p connParams) *conn {
	local := protocol.EndpointPeer
	if p.side == observer.SideHub {
		local = protocol.EndpointHub
	}
	c := &conn{
		connParams: p,
		local:      local,
		inbound:    make(chan inboundMsg, inboundQueue),
		box:        newMailbox(),
		stopRead:   make(chan struct{}),
		done:       make(chan struct{}),
		timers:     make(map[*timer]struct{}),
		awaiting:   make(map[uint32]ackKey),
		late:       make(map[uint32]ackKey),
		queues:     make(map[protocol.NamespaceID]*nsQueue),
	}
	c.ioCtx, c.ioCancel = context.WithCancel(context.Background())
	c.wctx, c.wcancel = context.WithCancel(context.Background())
	codec := protocol.NewCodec(p.cfg.Limits(), 0)
	c.in = protocol.NewInbound(codec)
	c.out = protocol.NewOutbound(codec)
	c.w.init(c)
	c.pinger.c = c
	return c
}

// start launches the owner, reader and writer goroutines.
func (c *conn) start() {
	c.setState(stHandshaking)
	go c.run()
	go c.readLoop()
	go c.w.loop()
}

// ---- owner goroutine ------------------------------------------------------------

func (c *conn) run() {
	defer close(c.done)
	c.begin()
	c.settle()
	for !c.exited {
		select {
		case m := <-c.inbound:
			c.handleInbound(m)
		case <-c.box.wake:
			c.runPosted()
		}
		c.settle()
		c.publishLoad()
		c.maybeExit()
	}
	c.pubQueued.Store(0)
	c.pubInFlight.Store(0)
}

// publishLoad makes the outbound accounting readable from other goroutines (Load).
func (c *conn) publishLoad() {
	c.pubQueued.Store(int64(c.sched.queued + c.sched.unflushed()))
	c.pubInFlight.Store(int64(c.inFlight))
}

// await records a frame sent that expects an acknowledgement; unawait forgets it.
func (c *conn) await(seq uint32, k ackKey) {
	c.awaiting[seq] = k
	if k.ack == protocol.TypeUpdateAck {
		c.inFlight++
	}
}

func (c *conn) unawait(seq uint32) {
	if k, ok := c.awaiting[seq]; ok {
		delete(c.awaiting, seq)
		if k.ack == protocol.TypeUpdateAck {
			c.inFlight--
		}
	}
}

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

func (c *conn) peerHandshake() *protocol.PeerHandshake {
	return &protocol.PeerHandshake{PeerInstanceID: c.peerID, HubInstanceID: c.hubID, Nonce: c.nonce, Offer: c.cfg.Offer()}
}

// post queues f for the owner goroutine without blocking; false once the owner has exited.
func (c *conn) post(f func()) bool { return c.box.post(f) }

func (c *conn) runPosted() {
	fs := c.box.take()
	for i, f := range fs {
		fs[i] = nil
		f()
		c.settle()
	}
}

// settle runs deferred notifications and the data pump until neither has work: it runs
// after every event, so handlers are never re-entered.
func (c *conn) settle() {
	for {
		if len(c.deferred) > 0 {
			d := c.deferred
			c.deferred = nil
			for _, f := range d {
				f()
			}
			continue
		}
		if !c.pump() {
			return
		}
	}
}

func (c *conn) defer_(f func()) { c.deferred = append(c.deferred, f) }

// maybeExit ends the owner goroutine once the connection is closed and its reader, writer
// and pinger are gone. Posted functions that arrived before run first.
func (c *conn) maybeExit() {
	if !c.closing || !c.readerDone || !c.writerDone || c.pinger.running {
		return
	}
	c.ioCancel()
	c.wcancel()
	if c.closeTimer != nil {
		c.closeTimer.Stop()
	}
	for _, f := range c.box.shut() {
		f()
	}
	c.deferred = nil
	c.exited = true
	if c.onExit != nil {
		c.onExit(c)
	}
}

func (c *conn) setState(s connState) {
	from := c.state
	if from == s {
		return
	}
	c.state = s
	c.pubState.Store(uint32(s))
	// §23.1: hub states are handshaking/ready/draining/closed; the peer controller reports
	// its own §15.1 states.
	if c.side == observer.SideHub && from != stUpgraded && c.em.Enabled() {
		c.em.Emit(observer.ConnectionStateChanged{ConnectionID: c.connIDOpt(), From: connStateNames[from], To: connStateNames[s]})
	}
}

// publicState is the state as other goroutines may read it.
func (c *conn) publicState() observer.ConnectionState {
	s := connState(c.pubState.Load())
	if s == stUpgraded {
		return observer.ConnHandshaking
	}
	return connStateNames[s]
}

// connIDOpt is the connectionId of events: present only after the handshake (§23.3).
func (c *conn) connIDOpt() observer.Opt[string] {
	if c.connID == "" || !c.admitted.Load() {
		return observer.None[string]()
	}
	return observer.Some(c.connID)
}

// after arms a connection timer through the injected clock; it fires on the owner goroutine
// unless stopped or the connection closed.
func (c *conn) after(d time.Duration, f func()) *timer {
	t := &timer{c: c, f: f}
	c.timers[t] = struct{}{}
	t.ct = c.clock.AfterFunc(d, func() {
		c.post(func() {
			if t.stopped || c.closing {
				return
			}
			t.stopped = true
			delete(c.timers, t)
			t.f()
		})
	})
	return t
}

func (c *conn) beginWork() func() {
	if c.work == nil {
		return func() {}
	}
	return c.work.begin()
}

// ---- inbound ----------------------------------------------------------------------

func (c *conn) readLoop() {
	defer c.post(func() { c.readerDone = true })
	early := 0
	for {
		msg, err := c.t.Read(c.ioCtx, c.cfg.MaxFrameBytes)
		if err == nil && !c.admitted.Load() {
			// GUIDE §6: at most maxEarlyFrames frames beyond HELLO before admission.
			if early++; early > 1+c.cfg.MaxEarlyFrames {
				err = errEarlyFrames
			}
		}
		select {
		case c.inbound <- inboundMsg{msg, err}:
		case <-c.stopRead:
			return
		}
		if err != nil {
			return
		}
	}
}

var errEarlyFrames = errors.New("ws: early frame limit")

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

// rejectAdmission reports an admission refusal on the hub before the handshake completed
// (§23.1 auth-upgrade-rejected: pre-connection, no connectionId).
func (c *conn) rejectAdmission(r observer.AuthRejectReason) {
	if c.side == observer.SideHub && !c.admitted.Load() && c.onUpgrade != nil {
		c.onUpgrade(r)
	}
}

// dispatch routes a decoded frame: a frame the remote may not send is refused, a
// connection-scope frame is handled here, and a namespace-scope frame goes on to the
// namespace layer.
func (c *conn) dispatch(f protocol.Frame) {
	if !f.Type().Rule().Direction.SentBy(c.local.Remote()) {
		c.fail(frameErr(protocol.CodeUnsupportedMessageType, f, "message not sent in this direction (§5)"))
		return
	}
	if protocol.ScopeOf(f.Message) == protocol.ScopeConnection {
		c.handleConnectionFrame(f)
		return
	}
	if c.state == stHandshaking {
		c.fail(frameErr(protocol.CodeHelloRequired, f, "namespace frame before HELLO_ACK (§2)"))
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

func frameErr(code protocol.ErrorCode, f protocol.Frame, detail string) *protocol.Error {
	return &protocol.Error{Code: code, Scope: protocol.ScopeConnection, Type: f.Type(), Sequence: f.Sequence, HasHeader: true, Detail: detail}
}

// checkAck verifies an acknowledgement against the frames sent (§10.2: "Unknown、类型不匹配或
// namespace 不匹配的 ackedSequence 属 connection fatal ACK_STATE_VIOLATION").
func (c *conn) checkAck(f protocol.Frame) bool {
	a, isAck := f.Message.(protocol.Acknowledgement)
	if !isAck {
		c.forgetOnTerminal(f.Message, false)
		return true
	}
	seq, ns := a.Acknowledges(), a.Namespace()
	want, ok := c.awaiting[seq]
	if late, isLate := c.late[seq]; !ok && isLate && late.ack == f.Type() && late.ns == ns {
		// Sent by the remote before it learnt that this side ended the namespace: valid,
		// and of no further interest to the namespace layer.
		delete(c.late, seq)
		return false
	}
	if !ok || want.ack != f.Type() || want.ns != ns {
		c.fail(frameErr(protocol.CodeAckStateViolation, f, "ackedSequence names no unacknowledged frame of this type and namespace"))
		return false
	}
	c.unawait(seq)
	c.forgetOnTerminal(f.Message, false)
	return true
}

// maxLateAcks bounds the acknowledgements a connection still accepts after giving up on
// them. An acknowledgement older than the newest maxLateAcks given up is an
// ACK_STATE_VIOLATION like any unknown one.
const maxLateAcks = 1024

// forgetOnTerminal drops the acknowledgements a namespace can no longer send once its
// close handshake or a terminal namespace ERROR has passed in either direction (§12: a
// normal close does not wait for lost acknowledgements), and the UPDATE acknowledgements
// this side stopped waiting for when it declared ACK_TIMEOUT (§18: no resend; the next round
// repairs). When this side sent the frame, the remote may have acknowledged before it
// received it: those acknowledgements are still valid, so each is accepted once (and not
// delivered) instead of being an ACK_STATE_VIOLATION — within a bound, so that a remote that
// never acknowledges cannot grow this bookkeeping without limit.
func (c *conn) forgetOnTerminal(m protocol.Message, sent bool) {
	ns, ends := protocol.EndsNamespace(m)
	onlyUpdates := false
	if !ends {
		e, ok := m.(*protocol.ErrorMessage)
		if !sent || !ok || e.Scope != protocol.ScopeNamespace || e.Code != protocol.CodeAckTimeout {
			return
		}
		ns, onlyUpdates = e.NamespaceID, true
	}
	var given []uint32
	for seq, k := range c.awaiting {
		if k.ns == ns && (!onlyUpdates || k.ack == protocol.TypeUpdateAck) {
			c.unawait(seq)
			if sent {
				given = append(given, seq)
				c.late[seq] = k
			}
		}
	}
	slices.Sort(given) // map order is random; keep lateOrder oldest first
	c.lateOrder = append(c.lateOrder, given...)
	for len(c.lateOrder) > maxLateAcks {
		delete(c.late, c.lateOrder[0])
		c.lateOrder = c.lateOrder[1:]
	}
}

// deliver passes a namespace frame to the handler through the drain filter and OPEN
// admission.
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

// drainDrop handles a late frame during a drain (§6.3): an OPEN_NAMESPACE gets
// NAMESPACE_REOPEN_REQUIRES_RECONNECT on the hub, except in a REAUTH_REQUIRED drain where it
// is dropped silently like every other frame that would start work.
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

// remoteError handles a connection-scope ERROR from the remote (§13): the remote closes the
// connection; this side closes too, with the registry's close code, without answering.
func (c *conn) remoteError(m *protocol.ErrorMessage) {
	code := protocol.CloseInternal
	if spec, ok := m.Spec(); ok {
		code = spec.Close
	}
	c.info.Error = m.Code
	c.closeNow(code, seam.CloseInfo{Code: code, Error: m.Code, Remote: true, Cause: seam.CauseRemoteClose})
}

// ---- handshake (§6) -------------------------------------------------------------------

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

func (c *conn) acceptHelloAck(a *protocol.HelloAck) {
	n, err := c.peerHandshake().CheckAck(a)
	if err != nil {
		c.fail(asConnectionError(err))
		return
	}
	c.negotiated = n
	c.connID = a.ConnectionID
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
func (nopHandler) HandleRevoked(seam.Revocation)                  {}
func (nopHandler) HandleClosed(seam.CloseInfo)                    {}

// ---- drain (§6.3) ----------------------------------------------------------------------

// goAway sends a GOAWAY and drains (hub: restart, reauthentication).
func (c *conn) goAway(reason string, drainTimeout time.Duration, retryAfter time.Duration, hasRetry bool) {
	if c.closing || c.state != stReady {
		return
	}
	m := &protocol.GoAway{ReasonCode: reason, DrainTimeoutMs: uint64(drainTimeout / time.Millisecond),
		RetryAfterMs: uint64(retryAfter / time.Millisecond), HasRetryAfter: hasRetry}
	// §21: arm the drain, then send the observable GOAWAY.
	c.startDrain(seam.Drain{ReasonCode: reason, Deadline: c.clock.Now().Add(drainTimeout), RetryAfter: retryAfter, HasRetryAfter: hasRetry}, drainTimeout)
	// A GOAWAY that cannot be sent has closed the connection (control backpressure,
	// sequence exhaustion): there is nothing left to drain.
	_, _ = c.sendControl(m)
}

func (c *conn) goAwayReceived(m *protocol.GoAway) {
	d := seam.Drain{ReasonCode: m.ReasonCode, Received: true,
		RetryAfter: time.Duration(m.RetryAfterMs) * time.Millisecond, HasRetryAfter: m.HasRetryAfter}
	timeout := time.Duration(min(m.DrainTimeoutMs, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
	d.Deadline = c.clock.Now().Add(timeout)
	c.goAwayRecv = &d
	c.info.GoAway = &d
	if c.side == observer.SidePeer && c.em.Enabled() {
		ev := observer.GoAwayReceived{ConnectionID: c.connIDOpt(), ReasonCode: observer.FoldGoAwayReason(m.ReasonCode), DrainTimeoutMs: m.DrainTimeoutMs}
		if m.HasRetryAfter {
			ev.RetryAfterMs = observer.Some(m.RetryAfterMs)
		}
		c.em.Emit(ev)
	}
	if c.onGoAway != nil {
		c.onGoAway(c, d)
	}
	if c.state != stReady {
		// During the handshake there is nothing to drain.
		c.closeNow(protocol.CloseNormal, seam.CloseInfo{Code: protocol.CloseNormal, Cause: seam.CauseDrained, GoAway: &d})
		return
	}
	c.startDrain(d, timeout)
}

// localDrain drains without GOAWAY (the peer's local stop, §15.1 ready → draining).
func (c *conn) localDrain(timeout time.Duration) {
	if c.closing {
		return
	}
	if c.state != stReady {
		c.closeNow(protocol.CloseNormal, seam.CloseInfo{Code: protocol.CloseNormal, Cause: seam.CauseShutdown})
		return
	}
	c.startDrain(seam.Drain{Deadline: c.clock.Now().Add(timeout)}, timeout)
}

func (c *conn) startDrain(d seam.Drain, timeout time.Duration) {
	if c.state == stDraining {
		return
	}
	c.drain = &d
	c.setState(stDraining)
	c.drainTimer = c.after(timeout, func() { c.endDrain() })
	c.defer_(func() {
		if !c.closing {
			c.handler.HandleDrain(d)
		}
	})
}

func (c *conn) quiesced() {
	if c.state == stDraining && !c.closing {
		c.endDrain()
	}
}

// endDrain closes a drained connection: 1001 for the GOAWAY sender at the deadline or when
// quiesced (§6.3), 1000 for the side that was asked to go.
func (c *conn) endDrain() {
	code := protocol.CloseGoingAway
	if c.drain != nil && (c.drain.Received || c.drain.ReasonCode == "") {
		code = protocol.CloseNormal
	}
	c.closeNow(code, seam.CloseInfo{Code: code, Cause: seam.CauseDrained, GoAway: c.goAwayRecv})
}

// ---- closing (§13, §14, §18) -------------------------------------------------------------

// fail closes the connection for a connection-scope protocol error.
func (c *conn) fail(e *protocol.Error) { c.failWith(e, seam.CauseProtocol) }

// failWith sends a best-effort connection ERROR (WebSocket message boundaries keep the
// framing trusted after any NMCR-level error, §14) and closes with the registry's close code.
func (c *conn) failWith(e *protocol.Error, cause seam.CloseCause) {
	if c.closing {
		return
	}
	code := e.CloseCode()
	_, registered := protocol.LookupError(protocol.ScopeConnection, e.Code)
	var errFrame []byte
	if registered {
		m, err := protocol.NewErrorMessage(protocol.ScopeConnection, e.Code, protocol.NamespaceID{}, safeMessage(e.Code))
		if err == nil {
			if e.HasHeader {
				m.WithRelatedSequence(e.Sequence)
			}
			// Encoded with a placeholder sequence: the writer stamps the one that follows the
			// last frame it wrote.
			errFrame, err = c.out.Codec().AppendFrame(nil, 1, m)
		}
		if err != nil {
			// A registered code always builds a valid ERROR; should it not, the close goes
			// ahead without one.
			errFrame = nil
			c.log.LogAttrs(context.Background(), slog.LevelError, "replication connection error frame not encoded",
				slog.String("code", string(e.Code)), slog.String("error", err.Error()))
		}
	}
	c.log.LogAttrs(context.Background(), slog.LevelWarn, "replication connection failed",
		slog.String("side", string(c.side)), slog.String("code", string(e.Code)), slog.String("detail", e.Detail))
	c.teardown(code, errFrame, seam.CloseInfo{Code: code, Error: e.Code, Cause: cause}, false)
	// §23.4: after the decision took effect.
	if c.em.Enabled() {
		c.em.Emit(observer.ConnectionFailed{ConnectionID: c.connIDOpt(), Code: observer.FoldConnectionCode(string(e.Code)), WSCloseCode: int(code)})
	}
}

func safeMessage(code protocol.ErrorCode) string {
	return "connection error " + string(code)
}

// closeNow closes without an ERROR frame: code 0 means the transport is already gone.
func (c *conn) closeNow(code protocol.CloseCode, info seam.CloseInfo) {
	if c.closing {
		return
	}
	if info.Code == 0 {
		info.Code = code
	}
	c.teardown(code, nil, info, info.Cause == seam.CauseDrained)
}

// teardown is the close decision. In order (§18): the connection epoch is invalidated (no
// timer, pong or inbound frame acts after this point), unsent frames are dropped (unless a
// completed drain flushes what was already handed to the writer), the handler is told, and
// the writer sends errFrame (if any) and closes the transport.
func (c *conn) teardown(code protocol.CloseCode, errFrame []byte, info seam.CloseInfo, flush bool) {
	c.closing = true
	info.Handshook = c.info.Handshook
	if info.GoAway == nil {
		info.GoAway = c.goAwayRecv
	}
	c.info = info
	close(c.stopRead)
	for t := range c.timers {
		t.Stop()
	}
	c.pinger.stop()
	c.setState(stClosed)
	c.w.requestClose(errFrame, code, flush)
	// Bound the close: a writer stuck on a peer that reads nothing is cut off.
	c.closeTimer = c.clock.AfterFunc(c.cfg.CloseTimeout, func() { c.wcancel(); c.ioCancel() })
	for _, q := range c.queues {
		q.items = nil
		q.bytes = 0
		q.inRing = false
	}
	c.sched = scheduler{}
	if h := c.handler; h != nil {
		// Deferred: the close may be decided inside a handler callback (Session.Fail).
		c.defer_(func() { h.HandleClosed(info) })
	}
	if c.onClosed != nil {
		c.onClosed(c, info)
	}
}
