package ws

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
)

// This file lets an operator look into the connections (the admin API's status routes and
// the dashboard) without touching what their owner goroutines own: what is cheap and asked
// often — state, since when it is ready, the outbound load, the last ping's round trip —
// each connection publishes in atomics; what is per namespace is asked of the owner
// goroutine itself (Hub.NamespaceFlows), which answers between two events.

// ConnStatus describes one connection of the hub.
type ConnStatus struct {
	PeerInstanceID string
	ConnectionID   string
	State          observer.ConnectionState
	// ReadyAt is when the handshake completed (zero before).
	ReadyAt time.Time
	// QueuedBytes are the data bytes queued or handed to the writer and not yet written;
	// InFlight the live UPDATEs sent and awaiting their acknowledgement.
	QueuedBytes int64
	InFlight    int64
	// PingRTT is the round trip of the last WebSocket ping answered (zero before the first).
	PingRTT time.Duration
}

// introspection is what a connection publishes for ConnStatus besides its state and load:
// written by the owner goroutine, read by any.
type introspection struct {
	readyAt atomic.Int64 // unix nanoseconds on the connection's clock; 0 before ready
	pingRTT atomic.Int64 // nanoseconds; 0 before the first pong
}

// status is the connection's ConnStatus (any goroutine).
func (c *conn) status() ConnStatus {
	s := ConnStatus{PeerInstanceID: c.peerID, ConnectionID: c.connID, State: c.publicState(),
		QueuedBytes: c.pubQueued.Load(), InFlight: c.pubInFlight.Load(), PingRTT: time.Duration(c.pub.pingRTT.Load())}
	if ns := c.pub.readyAt.Load(); ns != 0 {
		s.ReadyAt = time.Unix(0, ns)
	}
	return s
}

// Flow is one connection's live updates of one namespace: UpdatesSent and UpdatesAcked
// count the UPDATEs sent since the namespace opened on the connection and those the peer
// acknowledged; InFlight those awaiting their acknowledgement now (sent minus acknowledged,
// minus those given up at an ACK timeout); QueuedUpdates and QueuedBytes the data waiting
// in the namespace's queue.
type Flow struct {
	PeerInstanceID string
	ConnectionID   string
	UpdatesSent    uint64
	UpdatesAcked   uint64
	InFlight       int
	QueuedUpdates  int
	QueuedBytes    int
}

// flowCount is a namespace's counters on a connection (owner goroutine). It goes when the
// namespace ends on the connection.
type flowCount struct{ sent, acked uint64 }

// flowOf answers for namespace ns (owner goroutine); false when the connection does not
// carry it.
func (c *conn) flowOf(ns protocol.NamespaceID) (Flow, bool) {
	f := Flow{PeerInstanceID: c.peerID, ConnectionID: c.connID}
	fc, counted := c.flows[ns]
	q, queued := c.queues[ns]
	if !counted && !queued {
		return f, false
	}
	if fc != nil {
		f.UpdatesSent, f.UpdatesAcked = fc.sent, fc.acked
	}
	for _, k := range c.awaiting {
		if k.ns == ns && k.ack == protocol.TypeUpdateAck {
			f.InFlight++
		}
	}
	if queued && !q.closed {
		f.QueuedUpdates, f.QueuedBytes = len(q.items), q.bytes
	}
	return f, true
}

// NamespaceFlows asks each ready connection's owner goroutine about namespace ns and
// returns the answers of the connections that carry it, waiting at most until ctx ends (a
// connection that has not answered by then is left out). Each call posts one function to
// each connection's mailbox: callers bound it by bounding themselves (the admin API's
// status streams are bounded).
func (h *Hub) NamespaceFlows(ctx context.Context, ns string) []Flow {
	id, err := protocol.ParseNamespaceID(ns)
	if err != nil {
		return nil
	}
	type answer struct {
		f  Flow
		ok bool
	}
	var waits []chan answer
	var conns []*conn
	h.each(func(c *conn) {
		if c.publicState() != observer.ConnReady {
			return
		}
		ch := make(chan answer, 1)
		if c.post(func() { f, ok := c.flowOf(id); ch <- answer{f, ok} }) {
			waits, conns = append(waits, ch), append(conns, c)
		}
	})
	var out []Flow
	for i, ch := range waits {
		select {
		case a := <-ch:
			if a.ok {
				out = append(out, a.f)
			}
		case <-conns[i].done:
		case <-ctx.Done():
			return out
		}
	}
	return out
}
