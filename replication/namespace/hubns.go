package namespace

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/registry"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// HubOptions configure the hub's namespace layer.
type HubOptions struct {
	// Registry holds the hub's namespaces (registry.RoleHub). Required.
	Registry *registry.Registry
	// Logger receives internal failures (never tokens, owners or bytes); nil discards them.
	Logger *slog.Logger
}

// Hub is the hub's namespace layer (§7–§12, §17, §19, §20): for every ready
// connection its NewHandler (the hub's NamespaceFactory) keeps one channel per namespace
// the peer opens, in the hub's nine states — opening, bootstrapping, reconciling, live,
// needs-resync, closing, and the end states closed, conflicted and failed.
//
// OPEN_NAMESPACE is authorized first (Session.Authorize: the authenticator's grant gives the
// local owner and the read/submit permissions, §19), then the namespace is opened in the
// registry for that owner, then the identities are compared (§7.1): no local replica on the
// peer is a bootstrap (the snapshot encoded in the slot that opens the replication session,
// §8.1), a matching identity a reconciliation, a different one REPLICATION_ID_MISMATCH or
// REPLICATION_EPOCH_MISMATCH. An unauthorized OPEN gets NAMESPACE_UNAUTHORIZED whether or not
// the namespace exists.
//
// The peer starts the sync rounds (§9); the hub answers each with its Step2 and its own
// Step1. Peer UPDATEs are applied in the namespace's write sequencer (the registry gates
// them: epoch, role, the protected meta check, degraded persistence) and acknowledged after
// the apply; the runtime's single document observer fans every applied update out to the
// other sessions, which send it within their windows. An epoch bump fences the sessions of
// the old epoch: the hub sends IDENTITY_CHANGED and the channel ends conflicted (§11).
type Hub struct {
	reg *registry.Registry
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]map[*hubChannel]HubSession // namespaceId → channel → status
}

// HubSession is the state of one peer's channel on a namespace, for the hub's admin API
// (GUIDE §8: "sessions":[{"peerInstanceId","state"}]).
type HubSession struct {
	PeerInstanceID string
	ConnectionID   string
	State          observer.ChannelState
}

// NewHub returns the hub's namespace layer over a hub registry. Pass its
// NewHandler as HubOptions.Namespaces; the Hub's Authenticator decides OPEN_NAMESPACE.
func NewHub(opts HubOptions) (*Hub, error) {
	if opts.Registry == nil || opts.Registry.Role() != registry.RoleHub {
		return nil, errors.New("namespace: NewHub needs a hub registry")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{reg: opts.Registry, log: log, sessions: make(map[string]map[*hubChannel]HubSession)}, nil
}

// Sessions lists the channels peers have on the namespace now, by peer and connection.
// Channels that ended stay listed until their connection closes.
func (h *Hub) Sessions(namespaceID string) []HubSession {
	h.mu.Lock()
	out := make([]HubSession, 0, len(h.sessions[namespaceID]))
	for _, st := range h.sessions[namespaceID] {
		out = append(out, st)
	}
	h.mu.Unlock()
	slices.SortFunc(out, func(a, b HubSession) int {
		if c := strings.Compare(a.PeerInstanceID, b.PeerInstanceID); c != 0 {
			return c
		}
		return strings.Compare(a.ConnectionID, b.ConnectionID)
	})
	return out
}

func (h *Hub) track(c *hubChannel) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.sessions[c.id]
	if m == nil {
		m = make(map[*hubChannel]HubSession)
		h.sessions[c.id] = m
	}
	m[c] = HubSession{PeerInstanceID: c.n.s.PeerInstanceID(), ConnectionID: c.n.s.ConnectionID(), State: c.state}
}

func (h *Hub) untrack(c *hubChannel) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.sessions[c.id]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(h.sessions, c.id)
		}
	}
}

// NewHandler is the hub's NamespaceFactory: the namespace layer of one ready connection.
func (h *Hub) NewHandler(s seam.Session) seam.Handler {
	hc := &hubConn{h: h, channels: make(map[protocol.NamespaceID]*hubChannel)}
	hc.nsConn = newNSConn(s, hc, h.log, s.PeerInstanceID())
	refuseChunking(s, h.log)
	return hc
}

// refuseChunking closes a connection that negotiated CAP_CHUNKED_UPDATE: this namespace
// layer runs the v1 generation (no UPDATE_CHUNK yet), so the connection must be configured
// with protocol.GenerationV1. A configuration error, loudly refused.
func refuseChunking(s seam.Session, log *slog.Logger) {
	if !s.Negotiated().Chunked() {
		return
	}
	log.Error("replication connection negotiated CAP_CHUNKED_UPDATE, which the namespace layer does not support yet; configure protocol.GenerationV1")
	s.Post(func() {
		s.Fail(protocol.CodeUnsupportedCapability, "the namespace layer runs the v1 generation")
	})
}

// hubConn is the hub's namespace layer on one connection.
type hubConn struct {
	nsConn
	h        *Hub
	channels map[protocol.NamespaceID]*hubChannel // the namespaces the peer opened
}

var _ seam.Handler = (*hubConn)(nil)

// HandleFrame routes the frames only the hub receives, OPEN_NAMESPACE and BOOTSTRAP_ACK, and
// hands the others to the shared routing.
func (hc *hubConn) HandleFrame(f protocol.Frame) {
	switch m := f.Message.(type) {
	case *protocol.OpenNamespace:
		hc.open(f, m)
	case *protocol.BootstrapAck:
		if c := hc.channels[m.NamespaceID]; c != nil {
			c.bootstrapAck(f, m)
		} else {
			hc.unknown(f.Type(), f.Sequence, m.NamespaceID)
		}
	default:
		hc.route(f)
	}
}

func (hc *hubConn) HandleRejected(e *protocol.Error)                    { hc.rejected(e) }
func (hc *hubConn) HandleDrain(seam.Drain)                              { hc.drain() }
func (hc *hubConn) HandleShed(ns protocol.NamespaceID, _ seam.ShedInfo) { hc.shed(ns) }

// HandleRevoked ends the revoked namespaces with NAMESPACE_UNAUTHORIZED (§19).
func (hc *hubConn) HandleRevoked(r seam.Revocation) {
	for _, ns := range r.Namespaces {
		c := hc.channels[ns]
		if c != nil {
			c.sendError(protocol.CodeNamespaceUnauthorized, 0, observer.FailedApplyRefused)
		}
	}
}

// HandleClosed ends every channel of the connection; their sessions close and their leases
// are released (admitted applies still settle, and Hub.Shutdown waits for them).
func (hc *hubConn) HandleClosed(seam.CloseInfo) {
	hc.connectionClosed(func(*channel) observer.ChannelState { return observer.ChannelClosed })
	for _, c := range hc.channels {
		hc.h.untrack(c)
	}
}

// ---- connRole --------------------------------------------------------------------------------

func (hc *hubConn) channel(ns protocol.NamespaceID) *channel {
	if c := hc.channels[ns]; c != nil {
		return &c.channel
	}
	return nil
}

// addressable: the peer addresses every namespace it opened.
func (hc *hubConn) addressable(ns protocol.NamespaceID) *channel { return hc.channel(ns) }

func (hc *hubConn) each(f func(*channel)) {
	for _, c := range hc.channels {
		f(&c.channel)
	}
}

// unknown answers a frame for a namespace this connection has not opened: a violation.
func (hc *hubConn) unknown(t protocol.MessageType, seq uint32, ns protocol.NamespaceID) {
	code := t.Rule().Violation
	if hc.sendError(ns, code, seq) {
		hc.emitNsError(ns, string(code), observer.DirectionSent)
	}
}

// ---- the hub's channel ----------------------------------------------------------------------

// hubChannel is a namespace the peer opened on one connection: the shared channel, and what
// only the hub keeps of it.
type hubChannel struct {
	channel
	hc          *hubConn
	openReq     protocol.OpenNamespace // the first OPEN_NAMESPACE
	openWaiting []uint32               // OPEN_NAMESPACE sequences waiting for the shared open
	grant       seam.Grant
	mode        protocol.OpenMode
	snapSeq     uint32 // the BOOTSTRAP_SNAPSHOT sequence
	lastRound   uint32 // the highest syncRoundId the peer started on this namespace (§9.1)
}

func newHubChannel(hc *hubConn, ns protocol.NamespaceID) *hubChannel {
	c := &hubChannel{hc: hc}
	c.init(&hc.nsConn, ns, observer.ChannelOpening, c)
	return c
}

// step1 answers the peer's Step1, which opens a round (§9.1): the hub's Step2 (the diff
// the peer lacks) and the hub's own Step1.
func (c *hubChannel) step1(f protocol.Frame, m *protocol.SyncStep1) {
	switch c.state {
	case observer.ChannelOpening, observer.ChannelBootstrapping:
		c.violation(f) // before OPEN_OK or the BOOTSTRAP_ACK
		return
	}
	if c.round.active || m.SyncRoundID <= c.lastRound {
		c.violation(f) // a second Step1 in the round, or a round id that does not increase
		return
	}
	c.lastRound = m.SyncRoundID
	c.beginRound(m.SyncRoundID)
	c.round.theirStep1 = f.Sequence
	id := m.SyncRoundID
	c.answerStep1(id, m.StateVector)
	post := c.n.s.Post
	err := c.sess.StateVectorAsync(func(sv []byte, err error) {
		post(func() {
			if c.ended() || c.closing() || !c.round.active || c.round.id != id {
				return
			}
			if err != nil {
				c.applyFailed(err, 0)
				return
			}
			c.sendStep1(sv)
		})
	})
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedInternalError)
	}
}

// fenced: an epoch bump fenced the session (§11): IDENTITY_CHANGED, and the channel ends
// conflicted.
func (c *hubChannel) fenced(id registry.Identity) {
	if c.ended() {
		return
	}
	if _, err := c.n.s.Send(&protocol.IdentityChanged{NamespaceID: c.ns, ReplicationID: id.ReplicationID, ReplicationEpoch: id.Epoch}); err != nil {
		return
	}
	c.terminate(observer.ChannelConflicted)
	c.n.emitNsError(c.ns, string(observer.NsErrIdentityChanged), observer.DirectionSent)
	c.emitConflicted(observer.ViaFence)
}

func (c *hubChannel) owesOpenAnswers() bool { return len(c.openWaiting) > 0 }

func (c *hubChannel) takeOpenAnswers() []uint32 {
	open := c.openWaiting
	c.openWaiting = nil
	return open
}

func (c *hubChannel) changed(observer.ChannelState) { c.hc.h.track(c) }

// drainOpening: an open under way is answered NAMESPACE_REOPEN_REQUIRES_RECONNECT when it
// completes (§6.3).
func (c *hubChannel) drainOpening() {}

// The hub never starts a round (the peer does, §9.1) and keeps nothing once a channel ends.
func (c *hubChannel) wentLive()                {}
func (c *hubChannel) resyncReady()             {}
func (c *hubChannel) stopPeriodic()            {}
func (c *hubChannel) conflicted()              {}
func (c *hubChannel) released(<-chan struct{}) {}

// schemaRearmed: never on the hub — its protected check refuses every peer change to meta.
func (c *hubChannel) schemaRearmed(*registry.SchemaRearm) {}

// ---- OPEN_NAMESPACE (§7) -----------------------------------------------------------------

func (hc *hubConn) open(f protocol.Frame, m *protocol.OpenNamespace) {
	if c := hc.channels[m.NamespaceID]; c != nil {
		hc.reopen(c, f, m)
		return
	}
	c := newHubChannel(hc, m.NamespaceID)
	hc.channels[m.NamespaceID] = c
	hc.h.track(c)
	c.openReq = *m
	c.openWaiting = []uint32{f.Sequence}
	// §7.1, §19: authorization first; a refusal says nothing about the namespace.
	grant, ok := hc.s.Authorize(m.NamespaceID)
	if !ok || !grant.Read {
		c.sendError(protocol.CodeNamespaceUnauthorized, 0, observer.FailedOpenFailed)
		return
	}
	c.grant = grant
	c.readOnly = !grant.Submit
	hc.startOpen(c)
}

// reopen answers an OPEN_NAMESPACE for a namespace this connection already has (§7.1):
// while opening or open it shares the operation and gets its own answer; after the end it is
// NAMESPACE_REOPEN_REQUIRES_RECONNECT.
func (hc *hubConn) reopen(c *hubChannel, f protocol.Frame, m *protocol.OpenNamespace) {
	same := m.HasLocalReplica == c.openReq.HasLocalReplica && m.ReplicationID == c.openReq.ReplicationID &&
		m.ReplicationEpoch == c.openReq.ReplicationEpoch
	switch {
	case c.ended() || c.closing():
		if hc.sendError(c.ns, protocol.CodeNamespaceReopenRequiresReconnect, f.Sequence) {
			c.terminate(observer.ChannelClosed)
			hc.emitNsError(c.ns, string(protocol.CodeNamespaceReopenRequiresReconnect), observer.DirectionSent)
		}
	case !same:
		// One namespace, one lifecycle: a second OPEN must declare what the first did.
		c.openWaiting = append(c.openWaiting, f.Sequence)
		if c.state == observer.ChannelOpening {
			c.sendError(protocol.CodeNamespaceStateViolation, 0, observer.FailedProtocolViolation)
		} else {
			c.openWaiting = nil
			c.violation(f)
		}
	case c.state == observer.ChannelOpening:
		c.openWaiting = append(c.openWaiting, f.Sequence)
	default:
		// An OPEN_OK that cannot be sent has closed the connection, which ends the channel.
		_, _ = hc.s.Send(&protocol.OpenOK{NamespaceID: c.ns, Mode: c.mode, ReplicationID: c.identity.ReplicationID, ReplicationEpoch: c.identity.Epoch})
	}
}

// startOpen opens the namespace in the registry for the grant's owner, off the connection
// goroutine (a first open loads the document from the store).
func (hc *hubConn) startOpen(c *hubChannel) {
	end := hc.s.BeginWork()
	owner, ns, ctx, reg := c.grant.Owner, c.id, hc.ctx, hc.h.reg
	go func() {
		defer end()
		lease, err := reg.Open(ctx, owner, ns)
		if !hc.s.Post(func() { hc.opened(c, lease, err) }) && lease != nil {
			lease.Release()
		}
	}()
}

func (hc *hubConn) opened(c *hubChannel, lease *registry.Lease, err error) {
	if c.state != observer.ChannelOpening {
		if lease != nil {
			lease.Release()
		}
		return
	}
	switch {
	case errors.Is(err, registry.ErrNotFound):
		c.sendError(protocol.CodeNamespaceNotFound, 0, observer.FailedOpenFailed)
		return
	case err != nil:
		hc.h.log.Warn("replication namespace open failed", slog.String("namespaceId", c.id), slog.String("error", err.Error()))
		c.sendError(protocol.CodeInternalError, 0, observer.FailedOpenFailed)
		return
	case hc.draining():
		lease.Release()
		c.sendError(protocol.CodeNamespaceReopenRequiresReconnect, 0, observer.FailedOpenFailed)
		return
	}
	c.lease = lease
	opts := c.sessionOptions()
	c.mode = protocol.ModeBootstrap
	if c.openReq.HasLocalReplica {
		// §7.1: the identity is compared in the slot that opens the session.
		c.mode = protocol.ModeReconcile
		opts.Expect = &registry.Identity{ReplicationID: c.openReq.ReplicationID, Epoch: c.openReq.ReplicationEpoch}
	} else {
		// §8.1: the snapshot is encoded in the same slot, so the session's update stream
		// starts exactly after it.
		opts.Snapshot = true
	}
	post := hc.s.Post
	err = lease.OpenSessionAsync(opts, func(sess *registry.Session, st registry.SessionStart, err error) {
		if !post(func() { hc.sessionOpened(c, sess, st, err) }) && sess != nil {
			sess.Close()
		}
	})
	if err != nil {
		c.sendError(protocol.CodeInternalError, 0, observer.FailedSessionOpenFailed)
	}
}

func (hc *hubConn) sessionOpened(c *hubChannel, sess *registry.Session, st registry.SessionStart, err error) {
	if c.state != observer.ChannelOpening {
		if sess != nil {
			sess.Close()
		}
		return
	}
	switch {
	case err != nil:
		// A mismatch ends conflicted (§7.1), so the cause concerns only a failed end.
		c.sendError(openErrorCode(err), 0, observer.FailedSessionOpenFailed)
		return
	case hc.draining():
		sess.Close()
		c.sendError(protocol.CodeNamespaceReopenRequiresReconnect, 0, observer.FailedOpenFailed)
		return
	case c.mode == protocol.ModeBootstrap && len(st.Snapshot) > hc.cfg.MaxBootstrapBytes:
		// §8.1 without CAP_CHUNKED_UPDATE: the snapshot cannot travel.
		sess.Close()
		c.sendError(protocol.CodeBootstrapTooLarge, 0, observer.FailedSendFailed)
		return
	}
	c.identity = st.Identity
	for range c.openWaiting {
		if _, err := hc.s.Send(&protocol.OpenOK{NamespaceID: c.ns, Mode: c.mode, ReplicationID: st.Identity.ReplicationID, ReplicationEpoch: st.Identity.Epoch}); err != nil {
			sess.Close()
			return
		}
	}
	c.openWaiting = nil
	c.attach(sess)
	if c.mode == protocol.ModeReconcile {
		c.setState(observer.ChannelReconciling) // the peer's Step1 opens the round
		return
	}
	seq, err := hc.s.Send(&protocol.BootstrapSnapshot{NamespaceID: c.ns, ReplicationID: st.Identity.ReplicationID,
		ReplicationEpoch: st.Identity.Epoch, Snapshot: st.Snapshot})
	if err != nil {
		c.sendFailed(err)
		return
	}
	c.snapSeq = seq
	c.setState(observer.ChannelBootstrapping)
	if hc.em.Enabled() {
		hc.em.Emit(observer.BootstrapSnapshotSent{ConnectionID: hc.connID(), NamespaceID: c.id, Bytes: len(st.Snapshot)})
	}
	c.timer = hc.s.AfterFunc(hc.cfg.BootstrapTimeout, func() {
		c.timer = nil
		if c.state == observer.ChannelBootstrapping {
			c.failed(observer.FailedBootstrapTimeout, hc.cfg.BootstrapTimeout)
		}
	})
}

// bootstrapAck: the peer imported the snapshot and opened its session (§8.2); its Step1
// follows.
func (c *hubChannel) bootstrapAck(f protocol.Frame, m *protocol.BootstrapAck) {
	switch {
	case c.ended() || c.closing():
		return
	case c.state != observer.ChannelBootstrapping || m.AckedSequence != c.snapSeq:
		c.violation(f)
		return
	}
	stopTimer(&c.timer)
	c.setState(observer.ChannelReconciling)
}
