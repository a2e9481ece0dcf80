package yws

import (
	"time"
)

// awareness is the awareness table of one namespace on this node: the last state each
// editor client (a Yjs clientID) announced, which connection announced it, and when. It
// follows y-protocols' Awareness rules so that stock providers see a consistent picture:
// an entry is taken when its clock is newer than the one known, or when it removes a
// known state with the same clock; a state not renewed within the outdated timeout (30 s;
// providers renew every 15 s) is removed; a connection's states are removed when it
// closes. Every removal this node makes is announced as a null state with clock + 1.
//
// Awareness is node-local: it is never replicated to other nodes (the replication
// contract carries document updates only), so editors see the presence of the editors
// attached to the same node.
//
// Bounded: at most maxStates states, at most maxPerConn of them held by one connection (an
// entry beyond either is dropped, and counted), and at most 4 × maxStates remembered clocks
// of removed clients (the oldest forgotten first). The bytes of one state are bounded
// before it gets here (the connection closes on a larger one).
//
// It is not safe for concurrent use: its room guards it with the room's mutex.
type awareness struct {
	maxStates  int
	maxPerConn int

	states  map[uint64]*awarenessState
	held    map[*conn]int           // states per owner, for maxPerConn; an owner with none has no entry
	removed map[uint64]removedClock // clocks of removed clients, so stale entries stay out
}

type awarenessState struct {
	clock   uint64
	state   []byte // JSON text (a copy)
	owner   *conn  // the connection that announced it
	updated time.Time
}

type removedClock struct {
	clock uint64
	at    time.Time
}

func newAwareness(maxStates, maxPerConn int) *awareness {
	return &awareness{maxStates: maxStates, maxPerConn: maxPerConn,
		states: map[uint64]*awarenessState{}, held: map[*conn]int{}, removed: map[uint64]removedClock{}}
}

// apply takes the entries of an awareness update from c at now. It returns the entries
// taken, to relay to the other editors, and how many were dropped by the bounds.
func (a *awareness) apply(c *conn, entries []AwarenessEntry, now time.Time) (taken []AwarenessEntry, dropped int) {
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
		if (!known || cur.owner != c) && a.held[c] >= a.maxPerConn {
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
// null state with clock + 1.
func (a *awareness) remove(now time.Time, drop func(s *awarenessState) bool) []AwarenessEntry {
	var out []AwarenessEntry
	for id, s := range a.states {
		if !drop(s) {
			continue
		}
		a.delete(id, s)
		a.remember(id, s.clock+1, now)
		out = append(out, AwarenessEntry{ClientID: id, Clock: s.clock + 1, State: []byte("null")})
	}
	return out
}

// delete removes the state of client id.
func (a *awareness) delete(id uint64, s *awarenessState) {
	delete(a.states, id)
	a.release(s.owner)
}

// release counts one state fewer held by owner.
func (a *awareness) release(owner *conn) {
	if a.held[owner] <= 1 {
		delete(a.held, owner)
		return
	}
	a.held[owner]--
}

// removeConn removes every state c announced (c closed).
func (a *awareness) removeConn(c *conn, now time.Time) []AwarenessEntry {
	return a.remove(now, func(s *awarenessState) bool { return s.owner == c })
}

// expire removes the states not renewed for timeout.
func (a *awareness) expire(now time.Time, timeout time.Duration) []AwarenessEntry {
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
