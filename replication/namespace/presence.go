package namespace

import (
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// PresenceRelay is where this implementation's presence extension (PRESENCE frames, with
// CAP_PRESENCE negotiated: docs/protocol.md#presence-extension) meets the rest of the node.
// The namespace layer tells it when a namespace is open for presence on a connection — the
// channel went live with the extension negotiated — hands it what the remote sends there,
// and tells it when that ends. Its methods are called on the connection's owner goroutine
// and must not block.
type PresenceRelay interface {
	// Opened: l's namespace is open for presence on its connection.
	Opened(l *PresenceLink)
	// Received: l's remote sent an awareness update (a PRESENCE frame's bytes, aliasing a
	// buffer that is never reused).
	Received(l *PresenceLink, awareness []byte)
	// Closed: l's namespace is no longer open for presence; lost when the connection went
	// away, rather than the namespace closing on it.
	Closed(l *PresenceLink, lost bool)
}

// PresenceLink is one namespace on one connection, for a PresenceRelay: the namespace, the
// remote instance's id, and Send to queue awareness entries to the remote.
type PresenceLink struct {
	Namespace string // the namespace id
	Remote    string // the remote instance's id (the peer's on the hub, the hub's on a peer)
	// Dropped, when the relay sets it in Opened, counts the entries the connection's
	// presence lane dropped (superseded by a newer one, or beyond its bounds). It is called
	// on the connection's owner goroutine.
	Dropped func(n int)

	s  seam.Session
	ns protocol.NamespaceID
}

// Send queues entries on the connection's presence lane, from any goroutine: the lowest
// lane, never ahead of document data; nothing when the connection closed.
func (l *PresenceLink) Send(entries []protocol.AwarenessEntry) {
	_ = l.s.Post(func() {
		if n := l.s.QueuePresence(l.ns, entries); n > 0 && l.Dropped != nil {
			l.Dropped(n)
		}
	})
}

// presenceOpenIn reports whether a channel in state st is open for presence, open telling
// whether it was: live, or live and needing a resync (its documents converge again;
// presence need not wait), or reconciling once it was open — the periodic reconciliation
// of a live channel (--reconcile-interval) must not close presence: closing removes every
// state the remote announced, on this node and on every other, and the remote's states
// would not come back before each editor's next change.
func presenceOpenIn(st observer.ChannelState, open bool) bool {
	return st == observer.ChannelLive || st == observer.ChannelNeedsResync || (open && st == observer.ChannelReconciling)
}

// presenceChanged tells the relay a channel opened or closed for presence (setState).
func (c *channel) presenceChanged() {
	rel := c.n.presence
	if rel == nil || !c.n.s.Negotiated().Presence() {
		return
	}
	switch open := presenceOpenIn(c.state, c.presence != nil); {
	case open && c.presence == nil:
		c.presence = &PresenceLink{Namespace: c.id, Remote: c.n.remote, s: c.n.s, ns: c.ns}
		rel.Opened(c.presence)
	case !open && c.presence != nil:
		l := c.presence
		c.presence = nil
		rel.Closed(l, c.n.closed)
	}
}

// presenceReceived hands a PRESENCE frame to the relay when its namespace is open for
// presence on the connection; otherwise it is dropped (presence is best effort: the remote
// may have sent it as the namespace closed).
func (n *nsConn) presenceReceived(m *protocol.Presence) {
	c := n.role.channel(m.NamespaceID)
	if c == nil || c.presence == nil || n.presence == nil {
		return
	}
	n.presence.Received(c.presence, m.Awareness)
}
