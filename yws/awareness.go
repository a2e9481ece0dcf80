package yws

import (
	"time"
)

// awareness is the awareness table of one namespace on this node: the last state each
// editor client (a Yjs clientID) announced, who announced it (an editor of this node — a
// y-websocket connection or a Hocuspocus document — or another node through the room's
// Presence link), and when. It
// follows y-protocols' Awareness rules so that stock providers see a consistent picture:
// an entry is taken when its clock is newer than the one known, or when it removes a
// known state with the same clock; a state not renewed within the outdated timeout (30 s;
// providers renew every 15 s) is removed; an editor's states are removed when it
// closes. Every removal this node makes is announced as a null state with clock + 1.
//
// The states of other nodes' editors (when the node has a Presence) live in the same table
// under the rules above, so every editor sees one consistent picture; they are removed when
// their node says it left, and otherwise expire like any state that is not renewed.
//
// Bounded: at most maxStates states in all, local and remote, at most maxPerConn of them
// held by one connection (an entry beyond either is dropped, and counted), and at most 4 ×
// maxStates remembered clocks of removed clients (the oldest forgotten first). The bytes of
// one state are bounded before it gets here (the connection closes on a larger one; a
// remote state over the bound is dropped by the link).
//
// It is not safe for concurrent use: its room guards it with the room's mutex.
type awareness struct {
	maxStates  int
	maxPerConn int

	states  map[uint64]*awarenessState
	held    map[holder]int          // states per holder, for maxPerConn; a holder with none has no entry
	removed map[uint64]removedClock // clocks of removed clients, so stale entries stay out
}

type awarenessState struct {
	clock   uint64
	state   []byte // JSON text (a copy)
	owner   holder // who announced it
	updated time.Time
}

// holder is who announced an awareness state: an editor of this node (conn), or another
// node (origin, as the room's Presence link names it). It is comparable: a map key.
type holder struct {
	conn   editor
	origin Origin
}

// local reports whether the state belongs to an editor of this node.
func (h holder) local() bool { return h.conn != nil }

type removedClock struct {
	clock uint64
	at    time.Time
}

func newAwareness(maxStates, maxPerConn int) *awareness {
	return &awareness{maxStates: maxStates, maxPerConn: maxPerConn,
		states: map[uint64]*awarenessState{}, held: map[holder]int{}, removed: map[uint64]removedClock{}}
}

// apply takes the entries of an awareness update from c at now. It returns the entries
// taken, to relay to the other editors, and how many were dropped by the bounds. A remote
// holder (another node) is bounded by maxStates alone.
func (a *awareness) apply(c holder, entries []AwarenessEntry, now time.Time) (taken []AwarenessEntry, dropped int) {
	for _, e := range entries {
		cur, known := a.states[e.ClientID]
		var clock uint64
		switch {
		case known:
			clock = cur.clock
		default:
			clock = a.removed[e.ClientID].clock
		}
		if !(clock < e.Clock || (known && clock == e.Clock && e.Removed())) {
			continue
		}
		if e.Removed() {
			a.remember(e.ClientID, e.Clock, now)
			if known {
				a.delete(e.ClientID, cur)
				taken = append(taken, e)
			}
			continue
		}
		if c.local() && (!known || cur.owner != c) && a.held[c] >= a.maxPerConn {
			dropped++
			continue
		}
		switch {
		case !known:
			if len(a.states) >= a.maxStates {
				dropped++
				continue
			}
			cur = &awarenessState{}
			a.states[e.ClientID] = cur
			delete(a.removed, e.ClientID)
			a.held[c]++
		case cur.owner != c:
			a.release(cur.owner)
			a.held[c]++
		}
		cur.clock, cur.owner, cur.updated = e.Clock, c, now
		cur.state = append([]byte(nil), e.State...)
		taken = append(taken, AwarenessEntry{ClientID: e.ClientID, Clock: e.Clock, State: cur.state})
	}
	return taken, dropped
}

// remove removes the states of the clients for which drop is true, each announced as a
// null state with clock + 1; local holds those of them that belonged to this node's editors
// (what other nodes must hear).
func (a *awareness) remove(now time.Time, drop func(s *awarenessState) bool) (out, local []AwarenessEntry) {
	for id, s := range a.states {
		if !drop(s) {
			continue
		}
		a.delete(id, s)
		a.remember(id, s.clock+1, now)
		e := AwarenessEntry{ClientID: id, Clock: s.clock + 1, State: []byte("null")}
		out = append(out, e)
		if s.owner.local() {
			local = append(local, e)
		}
	}
	return out, local
}

// delete removes the state of client id.
func (a *awareness) delete(id uint64, s *awarenessState) {
	delete(a.states, id)
	a.release(s.owner)
}

// release counts one state fewer held by owner.
func (a *awareness) release(owner holder) {
	if a.held[owner] <= 1 {
		delete(a.held, owner)
		return
	}
	a.held[owner]--
}

// removeHolder removes every state h announced (a connection closed, a node left).
func (a *awareness) removeHolder(h holder, now time.Time) (out, local []AwarenessEntry) {
	return a.remove(now, func(s *awarenessState) bool { return s.owner == h })
}

// expire removes the states not renewed for timeout.
func (a *awareness) expire(now time.Time, timeout time.Duration) (out, local []AwarenessEntry) {
	return a.remove(now, func(s *awarenessState) bool { return now.Sub(s.updated) >= timeout })
}

// all returns every state (for a new connection, and queryAwareness).
func (a *awareness) all() []AwarenessEntry {
	out := make([]AwarenessEntry, 0, len(a.states))
	for id, s := range a.states {
		out = append(out, AwarenessEntry{ClientID: id, Clock: s.clock, State: s.state})
	}
	return out
}

// local returns the states this node's editors hold (what another node asks for).
func (a *awareness) local() []AwarenessEntry {
	var out []AwarenessEntry
	for id, s := range a.states {
		if s.owner.local() {
			out = append(out, AwarenessEntry{ClientID: id, Clock: s.clock, State: s.state})
		}
	}
	return out
}

// remember keeps the clock of a removed client, forgetting the oldest beyond the bound.
func (a *awareness) remember(id, clock uint64, now time.Time) {
	a.removed[id] = removedClock{clock, now}
	if len(a.removed) <= 4*a.maxStates {
		return
	}
	var oldest uint64
	var at time.Time
	first := true
	for rid, r := range a.removed {
		if first || r.at.Before(at) {
			oldest, at, first = rid, r.at, false
		}
	}
	delete(a.removed, oldest)
}
