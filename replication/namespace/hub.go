package namespace

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/nomicore/nomicore/auth"
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
	// OwnerMismatch, when set, is told of an OPEN refused as NAMESPACE_NOT_FOUND for a
	// namespace that exists, active, under another owner than the one the peer's grant
	// gives: the peer's instance id, the namespace, the grant's owner and the namespace's.
	// The peer learns nothing of it (docs/protocol.md#authorization); the hub's operator
	// needs both owners to fix the grant or the namespace. Called off the connection's
	// goroutine.
	OwnerMismatch func(peerInstanceID, namespaceID, grantOwner, namespaceOwner string)
	// Missing, when set, is told of an OPEN refused as NAMESPACE_NOT_FOUND for a namespace
	// the hub does not have under any owner: the peer's instance id, the namespace, and
	// whether the peer holds a replica of it (a hub restored from an older backup lacks the
	// namespaces created since, which their peers still hold). Called off the connection's
	// goroutine.
	Missing func(peerInstanceID, namespaceID string, peerHasReplica bool)
	// Presence, when set, relays this implementation's presence extension on the
	// connections that negotiated it (see PresenceRelay).
	Presence PresenceRelay
}

// Hub is the hub's namespace layer: for every ready connection its NewHandler (the hub's
// seam.NamespaceFactory) keeps one channel per namespace the peer opens, in the hub's nine
// states — opening, bootstrapping, reconciling, live, needs-resync, closing, and the end
// states closed, conflicted and failed.
//
// OPEN_NAMESPACE (docs/protocol.md#hub-checks) is authorized first (seam.Session.Authorize:
// the authenticator's grant gives the hub's local owner and the read/submit permissions),
// then the namespace is opened in the registry for that owner, then the identities are
// compared: no local replica on the peer means a bootstrap (the snapshot is encoded in the
// slot that opens the replication session), a matching identity a reconciliation, a
// different one REPLICATION_ID_MISMATCH or REPLICATION_EPOCH_MISMATCH. An unauthorized OPEN
// gets NAMESPACE_UNAUTHORIZED whether or not the namespace exists.
//
// The peer starts the sync rounds; the hub answers each with its Step2 and its own Step1.
// Peer UPDATEs are applied in the namespace's write sequencer (the registry gates them:
// epoch, role, the protected meta check, degraded persistence) and acknowledged after the
// apply; the runtime's single document observer fans every applied update out to the other
// sessions, which send it within their windows. An epoch bump fences the sessions of the
// old epoch: the hub sends IDENTITY_CHANGED and the channel ends conflicted.
//
// A connection's channels live on that connection's owner goroutine; Sessions may be called
// from any goroutine.
type Hub struct {
	reg           *registry.Registry
	log           *slog.Logger
	ownerMismatch func(peerInstanceID, namespaceID, grantOwner, namespaceOwner string) // HubOptions.OwnerMismatch
	missing       func(peerInstanceID, namespaceID string, peerHasReplica bool)        // HubOptions.Missing
	presence      PresenceRelay                                                        // HubOptions.Presence

	mu       sync.Mutex                            // guards sessions
	sessions map[string]map[*hubChannel]HubSession // namespaceId → channel → status

	assemblies assemblyCounter // chunked transfers being received, on every connection
}

// HubSession is the state of one peer's channel on a namespace, for the hub's admin API
// (its "sessions" list of a namespace).
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
	return &Hub{reg: opts.Registry, log: log, ownerMismatch: opts.OwnerMismatch, missing: opts.Missing, presence: opts.Presence,
		sessions: make(map[string]map[*hubChannel]HubSession)}, nil
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

// Assemblies returns the number of chunked transfers being received from peers now, on every
// connection: each holds a buffer of its declared size until it completes or is discarded.
func (h *Hub) Assemblies() int64 { return h.assemblies.Load() }

// track records c's state for Sessions.
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

// untrack forgets c.
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

// NewHandler is the hub's seam.NamespaceFactory: the namespace layer of one ready
// connection.
func (h *Hub) NewHandler(s seam.Session) seam.Handler {
	hc := &hubConn{h: h, channels: make(map[protocol.NamespaceID]*hubChannel)}
	hc.nsConn = newNSConn(s, hc, h.log, s.PeerInstanceID(), &h.assemblies, h.presence)
	return hc
}

// hubConn is the hub's namespace layer on one connection, on its owner goroutine.
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

// HandleRevoked ends the revoked namespaces with NAMESPACE_UNAUTHORIZED.
func (hc *hubConn) HandleRevoked(r auth.PeerRevocation) {
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
