package ws

import (
	"time"

	"github.com/nomicore/nomicore/auth"
	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
	"github.com/nomicore/nomicore/yjs"
)

// session is the seam.Session of a ready connection: the namespace layer's handle on it.
// Like the connection it wraps, it is used on the owner goroutine, except for Post and
// BeginWork.
type session struct{ c *conn }

var (
	_ seam.Session = session{}
	_ seam.Timer   = (*timer)(nil)
	_ seam.Outbox  = (*nsQueue)(nil)
)

func (s session) Side() observer.Side             { return s.c.side }
func (s session) ConnectionID() string            { return s.c.connID }
func (s session) PeerInstanceID() string          { return s.c.peerID }
func (s session) HubInstanceID() string           { return s.c.hubID }
func (s session) Negotiated() protocol.Negotiated { return s.c.negotiated }
func (s session) Config() *protocol.Config        { return s.c.cfg }
func (s session) Clock() clock.Clock              { return s.c.clock }
func (s session) Emitter() *observer.Emitter      { return s.c.em }
func (s session) Closed() bool                    { return s.c.closing }

func (s session) Authorize(ns protocol.NamespaceID) (auth.NamespaceGrant, bool) {
	if s.c.auth == nil {
		return auth.NamespaceGrant{}, false
	}
	return s.c.auth.AuthorizeNamespace(s.c.peerID, ns)
}

func (s session) Draining() (seam.Drain, bool) {
	if s.c.drain == nil {
		return seam.Drain{}, false
	}
	return *s.c.drain, true
}

func (s session) Stats() seam.QueueStats {
	s.c.w.collect()
	sc := &s.c.sched
	return seam.QueueStats{QueuedBytes: sc.queued, QueuedTransferBytes: sc.queuedBulk, UnflushedData: sc.unflushedData,
		UnflushedControl: sc.unflushedControl, Paused: sc.paused, Namespaces: len(sc.ring) + len(sc.parked)}
}

func (s session) QueuePresence(ns protocol.NamespaceID, entries []protocol.AwarenessEntry) int {
	return s.c.queuePresence(ns, entries)
}

func (s session) Send(m protocol.NamespaceMessage) (uint32, error) {
	return s.c.sendNamespaceControl(m)
}

func (s session) Outbox(ns protocol.NamespaceID, gate func() bool) seam.Outbox {
	return s.c.outbox(ns, gate)
}

func (s session) AfterFunc(d time.Duration, f func()) seam.Timer { return s.c.after(d, f) }
func (s session) Post(f func()) bool                             { return s.c.post(f) }
func (s session) BeginWork() (end func())                        { return s.c.beginWork() }
func (s session) Quiesced()                                      { s.c.quiesced() }

func (s session) Fail(code protocol.ErrorCode, detail string) {
	s.c.fail(&protocol.Error{Code: code, Scope: protocol.ScopeConnection, Detail: detail})
}

func (s session) Working() {
	if s.c.onWorking != nil && !s.c.closing {
		s.c.onWorking(s.c)
	}
}

func (s session) Reconnect() {
	if s.c.side == observer.SidePeer {
		s.c.closeNow(protocol.CloseGoingAway, seam.CloseInfo{Code: protocol.CloseGoingAway, Cause: seam.CauseReconnect})
	}
}

// timer is a connection timer (seam.Timer): it fires through the injected clock by posting
// to the owner goroutine, and does nothing once stopped or once the connection closed. Owner
// goroutine only.
type timer struct {
	c       *conn
	ct      clock.Timer
	f       func()
	stopped bool
}

// Stop prevents f from running; it reports whether it did. A nil timer is stopped.
func (t *timer) Stop() bool {
	if t == nil || t.stopped {
		return false
	}
	t.stopped = true
	t.ct.Stop()
	delete(t.c.timers, t)
	return true
}

// An nsQueue is the seam.Outbox of its namespace. Owner goroutine only.

func (q *nsQueue) Enqueue(item seam.DataItem) error { return q.c.enqueue(q, item) }
func (q *nsQueue) Len() (items, bytes int)          { return len(q.items), q.bytes }
func (q *nsQueue) Clear() seam.ShedInfo             { return q.c.clearQueue(q) }
func (q *nsQueue) Wake()                            { q.c.unpark(q) }

func (q *nsQueue) Coalesce(merge func(updates [][]byte, shared []*yjs.Shared) ([]byte, error), sent func(seam.SentInfo)) error {
	return q.c.coalesce(q, merge, sent)
}

func (q *nsQueue) Close() {
	q.c.closeQueue(q)
	if q.c.queues[q.ns] == q {
		delete(q.c.queues, q.ns)
	}
	q.closed = true
}
