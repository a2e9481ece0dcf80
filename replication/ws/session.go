package ws

import (
	"time"

	"github.com/nomicore/nomicore/internal/clock"
	"github.com/nomicore/nomicore/observer"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/replication/seam"
)

// session is the seam.Session of a ready connection: the namespace layer's handle on it.
// Like the connection it wraps, it is used on the owner goroutine, except for Post and
// BeginWork.
type session struct{ c *conn }

var _ seam.Session = session{}

func (s session) Side() observer.Side             { return s.c.side }
func (s session) ConnectionID() string            { return s.c.connID }
func (s session) PeerInstanceID() string          { return s.c.peerID }
func (s session) HubInstanceID() string           { return s.c.hubID }
func (s session) Negotiated() protocol.Negotiated { return s.c.negotiated }
func (s session) Config() *protocol.Config        { return s.c.cfg }
func (s session) Clock() clock.Clock              { return s.c.clock }
func (s session) Emitter() *observer.Emitter      { return s.c.em }
func (s session) Closed() bool                    { return s.c.closing }

func (s session) Authorize(ns protocol.NamespaceID) (seam.Grant, bool) {
	if s.c.auth == nil {
		return seam.Grant{}, false
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
	sc := &s.c.sched
	return seam.QueueStats{QueuedBytes: sc.queued, UnflushedData: sc.unflushedData, UnflushedControl: sc.unflushedControl,
		Paused: sc.paused, Namespaces: len(sc.ring)}
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

// outbox is one namespace's data queue (seam.Outbox). Owner goroutine only.
type outbox struct {
	c *conn
	q *nsQueue
}

func (o *outbox) Enqueue(item seam.DataItem) error { return o.c.enqueue(o.q, item) }
func (o *outbox) Len() (items, bytes int)          { return len(o.q.items), o.q.bytes }
func (o *outbox) Clear() seam.ShedInfo             { return o.c.clearQueue(o.q) }

func (o *outbox) Coalesce(merge func(updates [][]byte) ([]byte, error), sent func(seam.SentInfo)) error {
	return o.c.coalesce(o.q, merge, sent)
}

func (o *outbox) Close() {
	o.c.clearQueue(o.q)
	if o.c.queues[o.q.ns] == o.q {
		delete(o.c.queues, o.q.ns)
	}
	o.q.closed = true
}
