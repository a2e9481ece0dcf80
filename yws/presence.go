package yws

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Presence carries awareness between this node and others: the other nodes of a hub
// cluster, a peer's hub, a hub's peers. Without one (Options.Presence nil) awareness is
// node-local. The endpoint knows nothing of how it travels: a room joins its Presence when
// it opens (the node's first editor of the namespace), hands it every change its own
// editors make, and takes the states of other nodes' editors through the RemoteStates it
// gave.
type Presence interface {
	// Join starts carrying the awareness of namespace ns (of owner) while this node has
	// editors on it: remote receives what other nodes announce. The link must ask the other
	// nodes for the states they hold (a room that opens late hears everyone at once). It
	// must not block.
	Join(owner, ns string, remote RemoteStates) PresenceLink
}

// PresenceLink is one room's side of a Presence.
type PresenceLink interface {
	// Publish announces changes of this node's editors' states (a null state removes one).
	// The room calls it with its lock held: it must not block nor call back into remote.
	Publish(entries []AwarenessEntry)
	// Close tells the other nodes this node has no editor of the namespace any more (they
	// remove every state it announced) and stops receiving.
	Close()
}

// Origin names who announced remote states: the node (as the dashboard shows it) and the
// link of that node that carried them — a node's room may close and open again while the
// others still hold what the first one announced, and its leave must not remove what the
// second one announces.
type Origin struct {
	Node string
	Link string
}

// RemoteStates is what a room offers its PresenceLink. Each method takes the room's lock:
// the link calls them from its own goroutine, never from inside Publish.
type RemoteStates interface {
	// Apply takes awareness entries origin (another node) announced, under y-protocols'
	// rules, and relays what changed to this node's editors; entries beyond the room's
	// bounds are dropped (counted in dropped).
	Apply(origin Origin, entries []AwarenessEntry) (dropped int)
	// RemoveOrigin removes every state origin announced: it left, or it is gone.
	RemoveOrigin(origin Origin)
	// Local returns the states of this node's editors (to answer another node's query).
	Local() []AwarenessEntry
}

// remoteStates is a room's RemoteStates.
type remoteStates struct{ rm *room }

func (r remoteStates) Apply(origin Origin, entries []AwarenessEntry) int {
	rm := r.rm
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if rm.closed {
		return 0
	}
	before := len(rm.aware.states)
	taken, dropped := rm.aware.apply(holder{origin: origin}, entries, rm.srv.opts.Clock.Now())
	rm.srv.m.awarenessChanged(len(rm.aware.states) - before)
	if len(taken) > 0 {
		rm.relayAwarenessLocked(taken, nil)
	}
	if dropped > 0 {
		rm.srv.m.awarenessDropped(dropped)
	}
	return dropped
}

func (r remoteStates) RemoveOrigin(origin Origin) {
	rm := r.rm
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if gone, _ := rm.aware.removeHolder(holder{origin: origin}, rm.srv.opts.Clock.Now()); len(gone) > 0 {
		rm.srv.m.awarenessChanged(-len(gone))
		rm.relayAwarenessLocked(gone, nil)
	}
}

func (r remoteStates) Local() []AwarenessEntry {
	r.rm.mu.Lock()
	defer r.rm.mu.Unlock()
	return r.rm.aware.local()
}

// publishLocked hands changes of this node's editors to the room's Presence link, if any.
// The caller holds rm.mu.
func (rm *room) publishLocked(entries []AwarenessEntry) {
	if rm.presence != nil && len(entries) > 0 {
		rm.presence.Publish(entries)
	}
}

// Present is one awareness state a namespace's table holds: the editor's Yjs client id,
// the name its state gives (y-protocols' convention: user.name), the name of the client
// that announced it on this node (empty for another node's editor), and the node it is
// attached to (empty: this node), as of Updated.
type Present struct {
	ClientID uint64
	User     string
	Client   string
	Node     string
	Updated  time.Time
}

// PresentIn lists the awareness states of namespace ns on this node, this node's editors
// and those of other nodes, by node, then user, then client id.
func (s *Server) PresentIn(ns string) []Present {
	s.mu.Lock()
	rm := s.rooms[ns]
	s.mu.Unlock()
	if rm == nil {
		return nil
	}
	rm.mu.Lock()
	out := make([]Present, 0, len(rm.aware.states))
	for id, st := range rm.aware.states {
		p := Present{ClientID: id, User: stateUserName(st.state), Node: st.owner.origin.Node, Updated: st.updated}
		if st.owner.conn != nil {
			p.Client = st.owner.conn.credential().Name
		}
		out = append(out, p)
	}
	rm.mu.Unlock()
	slices.SortFunc(out, func(a, b Present) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		if c := strings.Compare(a.User, b.User); c != 0 {
			return c
		}
		return cmp.Compare(a.ClientID, b.ClientID)
	})
	return out
}

// stateUserName returns the user name an awareness state gives ({"user":{"name":…}}, the
// convention of y-protocols' editors bindings), or "".
func stateUserName(state []byte) string {
	var s struct {
		User struct {
			Name string `json:"name"`
		} `json:"user"`
	}
	if json.Unmarshal(state, &s) != nil {
		return ""
	}
	return s.User.Name
}
