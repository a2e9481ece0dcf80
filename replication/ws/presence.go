package ws

import (
	"github.com/nomicore/nomicore/replication/protocol"
)

// This file is the presence extension's lane (docs/protocol.md#presence-extension): each
// namespace's editors' latest awareness states wait apart from its data, and go only when
// no data frame can go and the socket holds at most the low watermark — so presence never
// delays a document update and never holds a window slot (PRESENCE is not acknowledged).
// Under backpressure a newer state of an editor replaces the older one waiting: latest per
// editor wins. Everything here runs on the owner goroutine.

// Bounds of the lane: the entries one namespace holds waiting, and the bytes of every
// namespace's. An entry beyond either is dropped (the caller counts it): a namespace holds
// at most the editor endpoint's states, so only a flood meets them.
const (
	maxPresenceEntriesPerNamespace = 1024
	maxPresenceBytesPerConnection  = 4 << 20
)

// presenceLane is the connection's waiting presence.
type presenceLane struct {
	waiting map[protocol.NamespaceID]map[uint64]protocol.AwarenessEntry
	bytes   int
}

// queuePresence is seam.Session.QueuePresence.
func (c *conn) queuePresence(ns protocol.NamespaceID, entries []protocol.AwarenessEntry) (dropped int) {
	if !c.negotiated.Presence() || c.closing {
		return len(entries)
	}
	l := &c.presence
	if l.waiting == nil {
		l.waiting = map[protocol.NamespaceID]map[uint64]protocol.AwarenessEntry{}
	}
	q := l.waiting[ns]
	if q == nil {
		q = map[uint64]protocol.AwarenessEntry{}
		l.waiting[ns] = q
	}
	for _, e := range entries {
		size := protocol.AwarenessEntrySize(e)
		old, had := q[e.ClientID]
		if had {
			l.bytes -= protocol.AwarenessEntrySize(old)
			dropped++ // the older state is superseded
		}
		if (!had && len(q) >= maxPresenceEntriesPerNamespace) || l.bytes+size > maxPresenceBytesPerConnection ||
			size > protocol.MaxPresenceBytes-8 {
			if had {
				delete(q, e.ClientID)
			} else {
				dropped++
			}
			continue
		}
		q[e.ClientID] = e
		l.bytes += size
	}
	if len(q) == 0 {
		delete(l.waiting, ns)
	}
	return dropped
}

// pumpPresence sends waiting presence, one PRESENCE frame per namespace per turn, while the
// socket holds at most the low watermark. The caller has found that no data frame could go.
func (c *conn) pumpPresence() {
	l := &c.presence
	if len(l.waiting) == 0 || c.closing || c.state != stReady {
		return
	}
	s := &c.sched
	c.w.collect()
	for ns, q := range l.waiting {
		if s.paused || s.unflushed() > c.cfg.LowWaterBytes {
			c.w.wantReports(true) // the rest goes when the writer has written enough
			return
		}
		var entries []protocol.AwarenessEntry
		size := 8
		for id, e := range q {
			n := protocol.AwarenessEntrySize(e)
			if size+n > protocol.MaxPresenceBytes {
				break
			}
			entries = append(entries, e)
			size += n
			delete(q, id)
			l.bytes -= n
		}
		if len(q) == 0 {
			delete(l.waiting, ns)
		}
		m := &protocol.Presence{NamespaceID: ns, Awareness: protocol.AppendAwarenessUpdate(nil, entries)}
		b, _, err := c.out.AppendFrame(make([]byte, 0, frameOverhead+len(m.Awareness)), m)
		if err != nil {
			c.sequenceExhausted()
			return
		}
		s.unflushedData += len(b)
		c.handOff(outFrame{b: b})
	}
	if !s.paused {
		c.w.wantReports(false) // nothing waits for the writer's reports any more
	}
}
