package presence

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/yws"
)

// The cluster relay's subjects and headers (see the package doc).
const (
	clusterSubjectRoot = "nomicore.presence"
	headerNode         = "Nomicore-Presence-Node"
	headerKind         = "Nomicore-Presence-Kind"
	headerLink         = "Nomicore-Presence-Link"

	kindUpdate = "update"
	kindQuery  = "query"
	kindLeave  = "leave"
)

// Bounds of one namespace's subscription: messages delivered but not handled yet (beyond
// them NATS drops, and the states come back with the next change or renewal).
const (
	pendingMessages = 1024
	pendingBytes    = 8 << 20
)

// ClusterOptions configure a Cluster.
type ClusterOptions struct {
	// Node names this node to the others (--node-name); it is shown with its editors'
	// states on the others' dashboards.
	Node string
	// MaxStates and MaxStateBytes bound what is taken from another node in one message:
	// the editor endpoint's bounds of a namespace's states and of one state's JSON
	// (--max-awareness-states, --max-awareness-state-bytes).
	MaxStates, MaxStateBytes int
	// RelayInterval paces each namespace's updates; zero means DefaultRelayInterval.
	RelayInterval time.Duration
	Metrics       *Metrics
	Clock         clock.Clock
	Logger        *slog.Logger
}

// Cluster relays awareness among the nodes of a hub cluster over NATS core subjects (see
// the package doc). It is the yws.Presence of a cluster node.
type Cluster struct {
	nc   *nats.Conn
	opts ClusterOptions
	log  *slog.Logger
}

var _ yws.Presence = (*Cluster)(nil)

// NewCluster returns the relay of a node on nc (the node's connection to the cluster's NATS).
func NewCluster(nc *nats.Conn, opts ClusterOptions) (*Cluster, error) {
	if nc == nil || opts.Node == "" || opts.MaxStates <= 0 || opts.MaxStateBytes <= 0 {
		return nil, errors.New("presence: a NATS connection, a node name and the awareness bounds are required")
	}
	if opts.RelayInterval <= 0 {
		opts.RelayInterval = DefaultRelayInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Cluster{nc: nc, opts: opts, log: opts.Logger.With(slog.String("subsystem", "presence"))}, nil
}

// Subject is the presence subject of namespace ns of owner.
func Subject(owner, ns string) string {
	return clusterSubjectRoot + "." + base64.RawURLEncoding.EncodeToString([]byte(owner)) + "." + ns
}

// Join subscribes to the namespace's subject and asks the other nodes for their states.
func (c *Cluster) Join(owner, ns string, remote yws.RemoteStates) yws.PresenceLink {
	l := &clusterLink{c: c, subject: Subject(owner, ns), ns: ns, remote: remote, id: newLinkID()}
	l.out = newCoalescer(c.opts.Clock, c.opts.RelayInterval, c.opts.Metrics, l.sendUpdate)
	sub, err := c.nc.Subscribe(l.subject, l.receive)
	if err != nil {
		// Only a closed connection refuses a subscription: the node is shutting down.
		c.log.Warn("cannot relay this namespace's presence to the other nodes", slog.String("namespaceId", ns),
			slog.String("error", err.Error()))
		return l
	}
	if err := sub.SetPendingLimits(pendingMessages, pendingBytes); err != nil {
		c.log.Debug("presence subscription limits", slog.String("error", err.Error()))
	}
	l.mu.Lock()
	l.sub = sub
	l.requery = c.opts.Clock.AfterFunc(requeryAfter, func() { l.publish(kindQuery, nil) })
	l.mu.Unlock()
	l.publish(kindQuery, nil)
	return l
}

// requeryAfter is when a link asks again for the other nodes' states after it joined: a
// subscription's interest reaches the other NATS servers of the cluster asynchronously, so a
// node that joined a moment before may not have heard the first query (nor this node its
// answer).
const requeryAfter = time.Second

// newLinkID returns a random mark for a link's messages.
func newLinkID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// clusterLink is one namespace's relay on this node.
type clusterLink struct {
	c       *Cluster
	subject string
	ns      string
	remote  yws.RemoteStates
	out     *coalescer
	id      string // this link's mark on its messages: the others' Origin.Link

	mu      sync.Mutex // guards sub and requery
	sub     *nats.Subscription
	requery clock.Timer
}

// Publish takes changes of this node's editors; they go out with the next relay.
func (l *clusterLink) Publish(entries []yws.AwarenessEntry) { l.out.add(entries) }

// Close sends what still waits and the leave message, and unsubscribes.
func (l *clusterLink) Close() {
	if rest := l.out.close(); len(rest) > 0 {
		l.sendUpdate(rest)
	}
	l.mu.Lock()
	sub := l.sub
	l.sub = nil
	if l.requery != nil {
		l.requery.Stop()
	}
	l.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	l.publish(kindLeave, nil)
}

func (l *clusterLink) sendUpdate(entries []yws.AwarenessEntry) {
	if body := yws.AppendAwarenessUpdate(nil, entries); l.publish(kindUpdate, body) {
		l.c.opts.Metrics.out(len(entries), len(body))
	} else {
		l.c.opts.Metrics.drop(DropSendFailed, len(entries))
	}
}

// publish sends one message of kind; false when the connection did not take it.
func (l *clusterLink) publish(kind string, body []byte) bool {
	m := nats.NewMsg(l.subject)
	m.Header.Set(headerNode, l.c.opts.Node)
	m.Header.Set(headerKind, kind)
	m.Header.Set(headerLink, l.id)
	m.Data = body
	if err := l.c.nc.PublishMsg(m); err != nil {
		l.c.log.Debug("presence message not sent", slog.String("namespaceId", l.ns), slog.String("kind", kind),
			slog.String("error", err.Error()))
		return false
	}
	return true
}

// receive handles one message of another node (NATS calls it on the subscription's own
// goroutine, one message at a time).
func (l *clusterLink) receive(m *nats.Msg) {
	from := yws.Origin{Node: m.Header.Get(headerNode), Link: m.Header.Get(headerLink)}
	if from.Node == "" || from.Node == l.c.opts.Node {
		return // this node's own message, or not one of ours
	}
	switch m.Header.Get(headerKind) {
	case kindUpdate:
		entries, err := yws.DecodeAwareness(m.Data, l.c.opts.MaxStates, l.c.opts.MaxStateBytes)
		if err != nil {
			l.c.opts.Metrics.drop(DropMalformed, 1)
			l.c.log.Warn("presence update from another node does not decode; dropped", slog.String("node", from.Node),
				slog.String("namespaceId", l.ns), slog.String("error", err.Error()))
			return
		}
		kept := entries[:0]
		for _, e := range entries {
			if e.State == nil {
				l.c.opts.Metrics.drop(DropTooLarge, 1)
				continue
			}
			kept = append(kept, e)
		}
		dropped := l.remote.Apply(from, kept)
		l.c.opts.Metrics.drop(DropBounds, dropped)
		l.c.opts.Metrics.in(len(kept)-dropped, len(m.Data))
	case kindQuery:
		if local := l.remote.Local(); len(local) > 0 {
			l.sendUpdate(local)
		}
	case kindLeave:
		l.remote.RemoveOrigin(from)
	}
}
