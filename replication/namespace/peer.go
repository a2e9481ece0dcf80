package namespace

import (
	"slices"
	"strings"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// NewHandler is the peer's NamespaceFactory: the namespace layer of one ready connection.
// It opens every wanted target that is neither conflicted nor closed by a failed schema
// re-arm.
func (tc *TargetController) NewHandler(s seam.Session) seam.Handler {
	pc := &peerConn{tc: tc, channels: make(map[protocol.NamespaceID]*peerChannel)}
	pc.nsConn = newNSConn(s, pc, tc.log, s.HubInstanceID(), &tc.assemblies, tc.presence)
	pc.degradedBypass = true
	tc.mu.Lock()
	tc.conn = pc
	tc.liveChunked = s.Negotiated().Chunked()
	tc.liveCap = s.Config().MaxUpdateBytes
	if tc.liveChunked {
		tc.liveCap = s.Config().MaxChunkedUpdateBytes
	}
	tc.mu.Unlock()
	s.Post(pc.start)
	return pc
}

// peerConn is the peer's namespace layer on one connection, on its owner goroutine.
type peerConn struct {
	nsConn
	tc           *TargetController
	channels     map[protocol.NamespaceID]*peerChannel // the targets taken up on this connection
	lastRound    uint32                                // syncRoundIds are per connection and never wrap
	reconnecting bool
	// OPEN pacing: at most maxConcurrentOpens channels are opening or
	// bootstrapping at once — the hub admits no more OPENs than that and holds only
	// maxEarlyFrames frames beyond, and the snapshots in flight stay within its control
	// reserve (maxQueuedControlBytes ≥ maxBootstrapBytes) — and the other targets wait, in
	// order, in targeted.
	opening  int
	openWait []*peerChannel
	// working: the connection was reported as doing its work (seam.Session.Working).
	working bool
}

var _ seam.Handler = (*peerConn)(nil)

// start takes up every target that is neither conflicted nor closed by a failed schema
// re-arm, in namespace id order.
func (pc *peerConn) start() {
	if pc.closed || pc.draining() {
		return
	}
	pc.tc.mu.Lock()
	var open []*target
	for _, tg := range pc.tc.targets {
		if !tg.conflicted && !tg.schemaFailed {
			open = append(open, tg)
		}
	}
	pc.tc.mu.Unlock()
	slices.SortFunc(open, func(a, b *target) int { return strings.Compare(a.ns.String(), b.ns.String()) })
	for _, tg := range open {
		pc.targetAdded(tg)
	}
	pc.checkWorking()
}

// checkWorking tells the connection, once, that it does the work it was made for: every
// target taken up on it is live or has ended, and at least one is live (or there is none).
// The peer's controller then restarts its reconnect backoff.
func (pc *peerConn) checkWorking() {
	if pc.working || pc.closed || pc.draining() || len(pc.openWait) > 0 {
		return
	}
	live := 0
	for _, c := range pc.channels {
		switch {
		case c.state == observer.ChannelLive:
			live++
		case !c.ended():
			return
		}
	}
	if live == 0 && len(pc.channels) > 0 {
		return
	}
	pc.working = true
	pc.s.Working()
}

// targetAdded opens a target on this connection; a namespace that already had its
// lifecycle here needs a new connection.
func (pc *peerConn) targetAdded(tg *target) {
	if pc.closed || !pc.tc.wanted(tg) {
		return
	}
	if old := pc.channels[tg.ns]; old != nil {
		if old.target == tg && !old.ended() {
			return
		}
		pc.reconnect()
		return
	}
	c := &peerChannel{pc: pc, target: tg}
	c.init(&pc.nsConn, tg.ns, observer.ChannelTargeted, c)
	pc.channels[tg.ns] = c
	pc.openWait = append(pc.openWait, c)
	pc.openNext()
}

// openNext opens waiting targets while the pacing allows.
func (pc *peerConn) openNext() {
	for len(pc.openWait) > 0 && pc.opening < pc.cfg.MaxConcurrentOpens && !pc.closed && !pc.draining() {
		c := pc.openWait[0]
		pc.openWait[0] = nil
		pc.openWait = pc.openWait[1:]
		if c.state == observer.ChannelTargeted && pc.tc.wanted(c.target) {
			pc.open(c)
		}
	}
}

// targetRemoved closes a removed target's namespace.
func (pc *peerConn) targetRemoved(tg *target) {
	c := pc.channels[tg.ns]
	switch {
	case c == nil || c.target != tg || c.ended():
		pc.tc.cleanedUp(tg)
	case c.state == observer.ChannelTargeted:
		c.terminate(observer.ChannelClosed)
	case c.state == observer.ChannelOpening && c.openSent:
		c.closeAfterOpen = closeReasonRemove // CLOSE_NAMESPACE may follow only OPEN_OK
	case c.state == observer.ChannelOpening:
		c.terminate(observer.ChannelClosed) // nothing on the wire yet
	case c.closing():
		// The close under way (a drain) completes the removal.
	default:
		c.startClose(closeReasonRemove)
	}
}

func (pc *peerConn) reconnect() {
	if pc.reconnecting || pc.closed {
		return
	}
	pc.reconnecting = true
	pc.s.Reconnect()
}

// HandleFrame routes the frames only the peer receives, OPEN_OK, BOOTSTRAP_SNAPSHOT and
// IDENTITY_CHANGED, and hands the others to the shared routing.
func (pc *peerConn) HandleFrame(f protocol.Frame) {
	switch m := f.Message.(type) {
	case *protocol.OpenOK:
		if c := pc.requested(f, m.NamespaceID); c != nil {
			c.openOK(f, m)
		}
	case *protocol.BootstrapSnapshot:
		if c := pc.requested(f, m.NamespaceID); c != nil {
			c.snapshot(f, m)
		}
	case *protocol.IdentityChanged:
		if c := pc.requested(f, m.NamespaceID); c != nil {
			c.identityChanged()
		}
	default:
		pc.route(f)
	}
}

// requested returns the channel of a namespace this peer sent OPEN_NAMESPACE for, or
// answers TARGET_NOT_REQUESTED.
func (pc *peerConn) requested(f protocol.Frame, ns protocol.NamespaceID) *peerChannel {
	c := pc.channels[ns]
	if c == nil || !c.openSent {
		pc.unknown(f.Type(), f.Sequence, ns)
		return nil
	}
	return c
}

func (pc *peerConn) HandleRejected(e *protocol.Error)                    { pc.rejected(e) }
func (pc *peerConn) HandleShed(ns protocol.NamespaceID, _ seam.ShedInfo) { pc.shed(ns) }
func (pc *peerConn) HandleRevoked(auth.PeerRevocation)                   {}

// HandleDrain closes the open namespaces; no new round or open starts.
func (pc *peerConn) HandleDrain(seam.Drain) { pc.drain() }

// HandleClosed: the socket is gone: every channel's session stops, admitted applies
// settle and leases are released; the targets stay, projected as disconnected (failed and
// conflicted ones keep their state until the next connection or a reset, and one closed by
// a failed schema re-arm stays closed).
func (pc *peerConn) HandleClosed(seam.CloseInfo) {
	pc.connectionClosed(func(*channel) observer.ChannelState { return observer.ChannelDisconnected })
	pc.tc.mu.Lock()
	if pc.tc.conn == pc {
		pc.tc.conn = nil
	}
	for _, tg := range pc.tc.targets {
		switch {
		case tg.schemaFailed:
			tg.state = observer.ChannelClosed
		case tg.state == observer.ChannelFailed, tg.state == observer.ChannelConflicted:
		default:
			tg.state = observer.ChannelDisconnected
		}
	}
	pc.tc.mu.Unlock()
}

func (pc *peerConn) channel(ns protocol.NamespaceID) *channel {
	if c := pc.channels[ns]; c != nil {
		return &c.channel
	}
	return nil
}

// addressable: the hub may address a namespace once this peer sent OPEN_NAMESPACE for it;
// before, it was not requested on this connection.
func (pc *peerConn) addressable(ns protocol.NamespaceID) *channel {
	if c := pc.channels[ns]; c != nil && c.openSent {
		return &c.channel
	}
	return nil
}

func (pc *peerConn) each(f func(*channel)) {
	for _, c := range pc.channels {
		f(&c.channel)
	}
}

// unknown answers a frame for a namespace this peer did not request
// (docs/protocol.md#authorization): TARGET_NOT_REQUESTED.
func (pc *peerConn) unknown(_ protocol.MessageType, seq uint32, ns protocol.NamespaceID) {
	if pc.sendError(ns, protocol.CodeTargetNotRequested, seq) {
		pc.emitNsError(ns, string(protocol.CodeTargetNotRequested), observer.DirectionSent)
	}
}
