// Package timeline keeps what a hub or peer process did recently, for an operator's view
// (the admin API's status routes and the dashboard built on them): the last replication
// events, the totals of updates and bytes sent and received — counters the dashboard turns
// into rates — and, from the connection events, since when each connection is in its state,
// the peer's last reconnect backoff and the last connection failure.
//
// A Timeline is an observer.Observer: the binaries add it to the observer chain. Observers
// run on the replication goroutines and must not block, so Observe only takes a short lock.
// Per-frame events (one per UPDATE, Step2, …) only count; the others — connection and
// channel state changes, bootstraps, errors, resyncs, schema re-arms — are also kept, the
// last MaxEvents of them, in a ring that readers page through by sequence number, except the
// routine sync rounds of a live channel (live → reconciling → live), which would push
// everything else out of the ring: those are only counted (Totals.SyncRounds). Events
// carry identifiers, codes and sizes only (never document bytes, tokens or owners), so
// nothing kept here is secret.
package timeline

import (
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/observer"
)

// DefaultMaxEvents is how many events a Timeline keeps by default.
const DefaultMaxEvents = 1000

// Record is one kept event.
type Record struct {
	// Seq numbers the events a Timeline kept, from 1, without gaps.
	Seq  uint64
	Time time.Time
	// NamespaceID and ConnectionID are the event's, when it has them.
	NamespaceID, ConnectionID string
	Event                     observer.Event
}

// MarshalJSON renders {"seq","time","event":{type, side, keys…}}.
func (r Record) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Seq   uint64         `json:"seq"`
		Time  time.Time      `json:"time"`
		Event observer.Event `json:"event"`
	}{r.Seq, r.Time.UTC(), r.Event})
}

// Totals are counters since the process started. Sent and Received count the document
// payloads of replication messages — live updates, sync diffs and bootstrap snapshots,
// chunked or not — and their bytes; Acked the live updates the other side acknowledged.
type Totals struct {
	UpdatesSent     uint64 `json:"updatesSent"`
	BytesSent       uint64 `json:"bytesSent"`
	UpdatesReceived uint64 `json:"updatesReceived"`
	BytesReceived   uint64 `json:"bytesReceived"`
	UpdatesAcked    uint64 `json:"updatesAcked"`
	// SyncRounds counts the periodic sync rounds of live channels (not kept as events).
	SyncRounds uint64 `json:"syncRounds"`
}

// Link is what the events tell about a peer's connection to its hub.
type Link struct {
	// State is the connection's state after the last state change ("" before any), Since
	// when it entered it.
	State observer.ConnectionState
	Since time.Time
	// Backoff is the last reconnect backoff scheduled, while the connection is in backoff.
	Backoff *Backoff
	// LastFailure is the code of the last connection failure and when it happened.
	LastFailure     string
	LastFailureTime time.Time
}

// Backoff is a scheduled reconnect.
type Backoff struct {
	Attempt int
	Delay   time.Duration
	Reason  string
	At      time.Time // when it was scheduled; the reconnect is due at At+Delay
}

// Options configure a Timeline.
type Options struct {
	// Clock stamps the events; nil means clock.Real().
	Clock clock.Clock
	// MaxEvents bounds the kept events (zero: DefaultMaxEvents).
	MaxEvents int
}

// Timeline is the recent past of one process. It is safe for concurrent use.
type Timeline struct {
	clock clock.Clock

	mu      sync.Mutex // guards everything below
	ring    []Record   // the kept events, oldest at start (a circular buffer of cap max)
	start   int        // index of the oldest record in ring
	next    uint64     // Seq of the next record
	changed chan struct{}
	totals  Totals
	since   map[string]time.Time // hub: when each open connection became ready, by connection id
	link    Link
	// rounds are the channels in a routine sync round (live → reconciling, not kept), by
	// connection and namespace id; an entry goes when the channel leaves reconciling.
	rounds map[string]struct{}
}

// New returns an empty Timeline.
func New(opts Options) *Timeline {
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	return &Timeline{clock: opts.Clock, ring: make([]Record, 0, opts.MaxEvents), next: 1,
		changed: make(chan struct{}), since: map[string]time.Time{}, rounds: map[string]struct{}{}}
}

// Observe takes one event (it is the observer.Observer method).
func (t *Timeline) Observe(e observer.Event) {
	now := t.clock.Now()
	keep := keepEvent(e.Type())
	var rec Record
	if keep {
		rec = Record{Time: now, Event: e}
		for _, a := range e.Attrs() {
			switch a.Key {
			case "namespaceId":
				rec.NamespaceID = a.Value.String()
			case "connectionId":
				rec.ConnectionID = a.Value.String()
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.count(e)
	t.track(e, now)
	if !keep || t.routineRound(e) {
		return
	}
	rec.Seq = t.next
	t.next++
	if len(t.ring) < cap(t.ring) {
		t.ring = append(t.ring, rec)
	} else {
		t.ring[t.start] = rec
		t.start = (t.start + 1) % len(t.ring)
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// keepEvent: every event but the per-frame ones, except that bootstraps are kept too (one
// per namespace opened without a replica: worth seeing).
func keepEvent(typ observer.Type) bool {
	switch typ {
	case observer.TypeBootstrapSnapshotSent, observer.TypeBootstrapImported,
		observer.TypeChunkedSnapshotSent, observer.TypeChunkedSnapshotApplied:
		return true
	}
	return !typ.PerFrame()
}

// routineRound reports whether e is a step of a live channel's periodic sync round: live →
// reconciling, and the reconciling → live that ends that round (caller holds mu). Any
// other way out of reconciling is kept.
func (t *Timeline) routineRound(e observer.Event) bool {
	p, ok := e.Payload.(observer.ChannelStateChanged)
	if !ok {
		return false
	}
	key := p.ConnectionID.Or("") + " " + p.NamespaceID
	switch {
	case p.From == observer.ChannelLive && p.To == observer.ChannelReconciling:
		t.rounds[key] = struct{}{}
		t.totals.SyncRounds++
		return true
	case p.From == observer.ChannelReconciling:
		_, routine := t.rounds[key]
		delete(t.rounds, key)
		return routine && p.To == observer.ChannelLive
	}
	return false
}

// count adds a per-frame event to the totals (caller holds mu).
func (t *Timeline) count(e observer.Event) {
	tt := &t.totals
	sent := func(n int) { tt.UpdatesSent++; tt.BytesSent += uint64(max(n, 0)) }
	received := func(n int) { tt.UpdatesReceived++; tt.BytesReceived += uint64(max(n, 0)) }
	switch p := e.Payload.(type) {
	case observer.UpdateSent:
		sent(p.Bytes)
	case observer.SyncStep2Sent:
		sent(p.Bytes)
	case observer.BootstrapSnapshotSent:
		sent(p.Bytes)
	case observer.ChunkedUpdateSent:
		sent(int(p.TotalBytes))
	case observer.ChunkedSyncSent:
		sent(int(p.TotalBytes))
	case observer.ChunkedSnapshotSent:
		sent(int(p.TotalBytes))
	case observer.UpdateApplied:
		received(p.Bytes)
	case observer.DegradedBypassApplied:
		received(p.Bytes)
	case observer.SyncDiffApplied:
		received(p.Bytes)
	case observer.BootstrapImported:
		received(p.Bytes)
	case observer.ChunkedUpdateApplied:
		received(p.Bytes)
	case observer.ChunkedSyncApplied:
		received(p.Bytes)
	case observer.ChunkedSnapshotApplied:
		received(p.Bytes)
	case observer.UpdateAcked, observer.ChunkedUpdateAcked:
		tt.UpdatesAcked++
	}
}

// track follows the connection events (caller holds mu).
func (t *Timeline) track(e observer.Event, now time.Time) {
	switch p := e.Payload.(type) {
	case observer.ConnectionStateChanged:
		if e.Side == observer.SidePeer {
			t.link.State, t.link.Since = p.To, now
			if p.To != observer.ConnBackoff {
				t.link.Backoff = nil
			}
			return
		}
		id, ok := p.ConnectionID.Get()
		if !ok {
			return
		}
		switch p.To {
		case observer.ConnReady:
			t.since[id] = now
		case observer.ConnClosed:
			delete(t.since, id)
		}
	case observer.ConnectionBackoffScheduled:
		t.link.Backoff = &Backoff{Attempt: p.Attempt, Delay: time.Duration(p.DelayMs * float64(time.Millisecond)),
			Reason: string(p.Reason), At: now}
	case observer.ConnectionFailed:
		if e.Side == observer.SidePeer {
			t.link.LastFailure, t.link.LastFailureTime = string(p.Code), now
		}
	}
}

// Totals returns the counters.
func (t *Timeline) Totals() Totals {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.totals
}

// Link returns what the events tell about a peer's connection to its hub.
func (t *Timeline) Link() Link {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.link
	if l.Backoff != nil {
		b := *l.Backoff
		l.Backoff = &b
	}
	return l
}

// ConnectedSince returns when a hub connection became ready (false when unknown).
func (t *Timeline) ConnectedSince(connectionID string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.since[connectionID]
	return s, ok
}

// Page is what Events returns.
type Page struct {
	Records []Record
	// Next is the Seq to ask for next time (after the last record returned, or the next one
	// to come).
	Next uint64
	// Missed counts the events after the asked position that are no longer kept (the
	// reader fell more than MaxEvents behind); they are skipped.
	Missed uint64
}

// Events returns the kept events with Seq > after (all kept ones for after 0), oldest
// first, at most limit of them (limit <= 0: all), only those of namespace ns when ns is
// not "". Next lets the caller go on where this page ended.
func (t *Timeline) Events(after uint64, ns string, limit int) Page {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := Page{Next: after + 1}
	if p.Next > t.next {
		p.Next = t.next // a position from the future (another process's): start now
	}
	oldest := t.next - uint64(len(t.ring))
	if after > 0 && after+1 < oldest {
		p.Missed = oldest - (after + 1)
	}
	if p.Next < oldest {
		p.Next = oldest
	}
	for seq := p.Next; seq < t.next; seq++ {
		r := t.ring[(t.start+int(seq-oldest))%len(t.ring)]
		p.Next = seq + 1
		if ns != "" && r.NamespaceID != ns {
			continue
		}
		p.Records = append(p.Records, r)
		if limit > 0 && len(p.Records) == limit {
			break
		}
	}
	return p
}

// Latest returns the last n kept events (of namespace ns when not ""), oldest first.
func (t *Timeline) Latest(n int, ns string) []Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Record
	for i := len(t.ring) - 1; i >= 0 && len(out) < n; i-- {
		r := t.ring[(t.start+i)%len(t.ring)]
		if ns == "" || r.NamespaceID == ns {
			out = append(out, r)
		}
	}
	slices.Reverse(out)
	return out
}

// Changed returns a channel closed when the next event is kept.
func (t *Timeline) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// NextSeq is the Seq the next kept event will get.
func (t *Timeline) NextSeq() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next
}
