package presence

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nomicore/nomicore/clock"
	"github.com/nomicore/nomicore/replication/namespace"
	"github.com/nomicore/nomicore/replication/protocol"
	"github.com/nomicore/nomicore/yws"
)

// ReplicationOptions configure a Replication.
type ReplicationOptions struct {
	// Hub is true on a hub: a connection that goes away takes its states with it at once
	// (they reach the other peers as removals). On a peer, the states its hub relayed stay
	// until they expire, so a peer that loses its hub for a moment keeps showing them.
	Hub bool
	// MaxStates, MaxStateBytes and UpdatesPerSecond are the editor endpoint's bounds
	// (--max-awareness-states, --max-awareness-state-bytes, --awareness-updates-per-second):
	// the states of one namespace, the JSON of one state, and the PRESENCE frames one
	// connection may send per second for one namespace (on average over 5 s; beyond, they
	// are dropped and counted).
	MaxStates, MaxStateBytes, UpdatesPerSecond int
	// Timeout removes a state not renewed for that long (the awareness timeout, 30 s).
	Timeout time.Duration
	// RelayInterval paces what goes to each connection and namespace; zero means
	// DefaultRelayInterval.
	RelayInterval time.Duration
	Metrics       *Metrics
	Clock         clock.Clock
	Logger        *slog.Logger
}

// Replication carries editors' awareness over replication connections with the presence
// extension negotiated (docs/protocol.md#presence-extension): it is the node's
// namespace.PresenceRelay and the yws.Presence of its editors. For each namespace it keeps
// one awareness table of everyone it hears — this node's editors and each connection's
// remote — under y-protocols' rules, and relays every change to the others: a hub relays
// between its editors and its peers, and between its peers.
//
// On a node of a hub cluster it also has an upstream (SetUpstream: the cluster's relay
// among the nodes), which it joins for every namespace it holds, with editors or with
// peers: it announces there what it holds from its own editors and its own peers, and
// relays what the other nodes announce to its editors and its peers — never back upstream,
// so nothing loops (a peer has one connection, and what came from it never goes back to it).
type Replication struct {
	opts ReplicationOptions
	log  *slog.Logger

	mu       sync.Mutex // guards spaces, upstream and ownerOf
	spaces   map[string]*space
	upstream yws.Presence
	ownerOf  func(ns string) (owner string, ok bool)

	nextLink atomic.Uint64
	stop     context.CancelFunc
	done     chan struct{}
}

var (
	_ yws.Presence            = (*Replication)(nil)
	_ namespace.PresenceRelay = (*Replication)(nil)
)

// NewReplication returns the relay and starts its expiry; Close stops it.
func NewReplication(opts ReplicationOptions) (*Replication, error) {
	if opts.MaxStates <= 0 || opts.MaxStateBytes <= 0 || opts.UpdatesPerSecond <= 0 {
		return nil, errors.New("presence: the awareness bounds are required")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = yws.DefaultAwarenessTimeout
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
	ctx, cancel := context.WithCancel(context.Background())
	r := &Replication{opts: opts, log: opts.Logger.With(slog.String("subsystem", "presence")), spaces: map[string]*space{},
		stop: cancel, done: make(chan struct{})}
	go r.expireLoop(ctx)
	return r, nil
}

// SetUpstream makes up the relay of this node's states to the other nodes of its hub
// cluster, for the namespaces opened from now on (call it before the node serves): ownerOf
// gives a namespace's owner (the upstream's Join wants it; a namespace it does not know is
// not joined).
func (r *Replication) SetUpstream(up yws.Presence, ownerOf func(ns string) (owner string, ok bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.upstream, r.ownerOf = up, ownerOf
}

// Close stops the expiry.
func (r *Replication) Close() {
	r.stop()
	<-r.done
}

// party is who announced a state in a space: this node's editors (the zero party), a
// connection's remote (link), or another node of the cluster (upstream, with its origin).
type party struct {
	link     *namespace.PresenceLink
	upstream bool
	origin   yws.Origin
}

// local tells a state this node announces upstream: its editors' and its peers'.
func (p party) local() bool { return !p.upstream }

// held is one state of a space's table.
type held struct {
	clock   uint64
	state   []byte
	from    party
	updated time.Time
}

// linkState is a connection's side of a space: what waits to go to it, its origin name for
// the editors' table, and its rate of PRESENCE frames.
type linkState struct {
	out    *coalescer
	origin yws.Origin
	rate   tokens
}

// space is one namespace's relay.
type space struct {
	ns string

	mu      sync.Mutex       // guards the fields below
	room    yws.RemoteStates // nil without editors on this node
	links   map[*namespace.PresenceLink]*linkState
	table   map[uint64]*held
	removed map[uint64]uint64 // clocks of removed clients, bounded like the editors' table
	up      yws.PresenceLink  // the upstream's link, once joined; nil without an upstream
	gone    bool              // forgotten: a link joined after this must be closed
}

// announce sends changes of what this node holds from its editors and peers upstream
// (sp.mu held; the link's Publish does not block).
func (sp *space) announce(entries []yws.AwarenessEntry) {
	if sp.up != nil && len(entries) > 0 {
		sp.up.Publish(entries)
	}
}

// openSpace returns ns's space, creating it and joining the upstream, if any, for it (owner:
// the namespace's, when known; "" asks ownerOf).
func (r *Replication) openSpace(owner, ns string) *space {
	sp := r.spaceOf(ns)
	r.mu.Lock()
	up, ownerOf := r.upstream, r.ownerOf
	r.mu.Unlock()
	if up == nil {
		return sp
	}
	sp.mu.Lock()
	joined := sp.up != nil
	sp.mu.Unlock()
	if joined {
		return sp
	}
	if owner == "" {
		o, ok := ownerOf(ns)
		if !ok {
			return sp
		}
		owner = o
	}
	// Joined off every lock: the upstream may call back (its Apply) at once.
	link := up.Join(owner, ns, upstreamStates{r: r, sp: sp})
	sp.mu.Lock()
	if sp.up != nil || sp.gone { // joined meanwhile by another caller, or forgotten
		sp.mu.Unlock()
		link.Close()
		return sp
	}
	sp.up = link
	var mine []yws.AwarenessEntry
	for id, h := range sp.table {
		if h.from.local() {
			mine = append(mine, yws.AwarenessEntry{ClientID: id, Clock: h.clock, State: h.state})
		}
	}
	sp.announce(mine)
	sp.mu.Unlock()
	return sp
}

// spaceOf returns ns's space, creating it.
func (r *Replication) spaceOf(ns string) *space {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp := r.spaces[ns]
	if sp == nil {
		sp = &space{ns: ns, links: map[*namespace.PresenceLink]*linkState{}, table: map[uint64]*held{}, removed: map[uint64]uint64{}}
		r.spaces[ns] = sp
	}
	return sp
}

// forget drops ns's space once nothing uses it, leaving the upstream. sp.mu is not held.
func (r *Replication) forget(sp *space) {
	r.mu.Lock()
	sp.mu.Lock()
	var up yws.PresenceLink
	if sp.room == nil && len(sp.links) == 0 && r.spaces[sp.ns] == sp {
		delete(r.spaces, sp.ns)
		sp.gone, up, sp.up = true, sp.up, nil
	}
	sp.mu.Unlock()
	r.mu.Unlock()
	if up != nil {
		up.Close()
	}
}

// apply takes entries from p into sp's table (sp.mu held) and returns those taken, and how
// many were dropped by the bound of states.
func (r *Replication) apply(sp *space, p party, entries []yws.AwarenessEntry, now time.Time) (taken []yws.AwarenessEntry, dropped int) {
	for _, e := range entries {
		cur, known := sp.table[e.ClientID]
		clk := sp.removed[e.ClientID]
		if known {
			clk = cur.clock
		}
		removal := string(e.State) == "null"
		if !(clk < e.Clock || (known && clk == e.Clock && removal)) {
			continue
		}
		if removal {
			delete(sp.table, e.ClientID)
			r.remember(sp, e.ClientID, e.Clock)
			if known {
				taken = append(taken, e)
			}
			continue
		}
		if !known {
			if len(sp.table) >= r.opts.MaxStates {
				dropped++
				continue
			}
			cur = &held{}
			sp.table[e.ClientID] = cur
			delete(sp.removed, e.ClientID)
		}
		cur.clock, cur.from, cur.updated = e.Clock, p, now
		cur.state = append(cur.state[:0:0], e.State...)
		taken = append(taken, yws.AwarenessEntry{ClientID: e.ClientID, Clock: e.Clock, State: cur.state})
	}
	return taken, dropped
}

// remember keeps a removed client's clock, forgetting an arbitrary one beyond 4 × MaxStates.
func (r *Replication) remember(sp *space, id, clk uint64) {
	sp.removed[id] = clk
	if len(sp.removed) > 4*r.opts.MaxStates {
		for old := range sp.removed {
			if old != id {
				delete(sp.removed, old)
				break
			}
		}
	}
}

// removeFrom removes every state from p (sp.mu held), announced as null with clock + 1.
func (r *Replication) removeFrom(sp *space, drop func(h *held) bool) []yws.AwarenessEntry {
	var out []yws.AwarenessEntry
	for id, h := range sp.table {
		if drop(h) {
			delete(sp.table, id)
			r.remember(sp, id, h.clock+1)
			out = append(out, yws.AwarenessEntry{ClientID: id, Clock: h.clock + 1, State: []byte("null")})
		}
	}
	return out
}

// fanOut queues changes for every connection but except (sp.mu held).
func (sp *space) fanOut(entries []yws.AwarenessEntry, except *namespace.PresenceLink) {
	if len(entries) == 0 {
		return
	}
	for l, ls := range sp.links {
		if l != except {
			ls.out.add(entries)
		}
	}
}

// ---- this node's editors (yws.Presence) ----

// Join is yws.Presence: the room of this node's editors of ns.
func (r *Replication) Join(owner, ns string, remote yws.RemoteStates) yws.PresenceLink {
	sp := r.openSpace(owner, ns)
	sp.mu.Lock()
	sp.room = remote
	// What the connections and the other nodes announced, for the room's editors: given per
	// origin, off the space's lock (the room takes its own, and calls Publish under it).
	greet := map[yws.Origin][]yws.AwarenessEntry{}
	for id, h := range sp.table {
		e := yws.AwarenessEntry{ClientID: id, Clock: h.clock, State: h.state}
		if ls := sp.links[h.from.link]; h.from.link != nil && ls != nil {
			greet[ls.origin] = append(greet[ls.origin], e)
		} else if h.from.upstream {
			greet[h.from.origin] = append(greet[h.from.origin], e)
		}
	}
	sp.mu.Unlock()
	for o, entries := range greet {
		remote.Apply(o, entries)
	}
	return &roomLink{r: r, sp: sp}
}

// roomLink is a room's side of a space.
type roomLink struct {
	r  *Replication
	sp *space
}

// Publish takes this node's editors' changes to every connection. The room holds its lock:
// nothing here calls back into it.
func (l *roomLink) Publish(entries []yws.AwarenessEntry) {
	sp := l.sp
	sp.mu.Lock()
	defer sp.mu.Unlock()
	taken, _ := l.r.apply(sp, party{}, entries, l.r.opts.Clock.Now())
	sp.fanOut(taken, nil)
	sp.announce(taken)
}

// Close: the node has no editor of the namespace any more; what they still held goes.
func (l *roomLink) Close() {
	sp := l.sp
	sp.mu.Lock()
	sp.room = nil
	gone := l.r.removeFrom(sp, func(h *held) bool { return h.from.link == nil && !h.from.upstream })
	sp.fanOut(gone, nil)
	sp.announce(gone)
	sp.mu.Unlock()
	l.r.forget(sp)
}

// ---- connections (namespace.PresenceRelay) ----

// Opened is namespace.PresenceRelay: the connection hears every state the space holds.
func (r *Replication) Opened(l *namespace.PresenceLink) {
	sp := r.openSpace("", l.Namespace)
	l.Dropped = func(n int) { r.opts.Metrics.drop(DropSuperseded, n) }
	ls := &linkState{origin: yws.Origin{Node: l.Remote, Link: strconv.FormatUint(r.nextLink.Add(1), 10)},
		rate: newTokens(r.opts.UpdatesPerSecond, r.opts.Clock.Now())}
	ls.out = newCoalescer(r.opts.Clock, r.opts.RelayInterval, r.opts.Metrics, func(entries []yws.AwarenessEntry) {
		r.opts.Metrics.out(len(entries), awarenessSize(entries))
		l.Send(toWire(entries))
	})
	sp.mu.Lock()
	sp.links[l] = ls
	for _, h := range sp.table { // states a lost connection of the same remote announced are now this one's
		if h.from.link != nil && sp.links[h.from.link] == nil && h.from.link.Remote == l.Remote {
			h.from = party{link: l}
		}
	}
	all := make([]yws.AwarenessEntry, 0, len(sp.table))
	for id, h := range sp.table {
		all = append(all, yws.AwarenessEntry{ClientID: id, Clock: h.clock, State: h.state})
	}
	ls.out.add(all)
	sp.mu.Unlock()
}

// Received is namespace.PresenceRelay: a PRESENCE frame from l's remote.
func (r *Replication) Received(l *namespace.PresenceLink, awareness []byte) {
	sp := r.spaceOf(l.Namespace)
	now := r.opts.Clock.Now()
	sp.mu.Lock()
	ls := sp.links[l]
	if ls == nil {
		sp.mu.Unlock()
		return
	}
	if !ls.rate.take(now) {
		sp.mu.Unlock()
		r.opts.Metrics.drop(DropRate, 1)
		return
	}
	entries, err := yws.DecodeAwareness(awareness, r.opts.MaxStates, r.opts.MaxStateBytes)
	if err != nil {
		sp.mu.Unlock()
		r.opts.Metrics.drop(DropMalformed, 1)
		r.log.Warn("presence from the other end of a replication connection does not decode; dropped",
			slog.String("remote", l.Remote), slog.String("namespaceId", l.Namespace), slog.String("error", err.Error()))
		return
	}
	kept := entries[:0]
	for _, e := range entries {
		if e.State == nil {
			r.opts.Metrics.drop(DropTooLarge, 1)
			continue
		}
		kept = append(kept, e)
	}
	taken, dropped := r.apply(sp, party{link: l}, kept, now)
	r.opts.Metrics.drop(DropBounds, dropped)
	r.opts.Metrics.in(len(kept)-dropped, len(awareness))
	sp.fanOut(taken, l)
	sp.announce(taken)
	room, origin := sp.room, ls.origin
	sp.mu.Unlock()
	if room != nil && len(taken) > 0 {
		room.Apply(origin, taken)
	}
}

// Closed is namespace.PresenceRelay: l's namespace closed, or its connection went away.
func (r *Replication) Closed(l *namespace.PresenceLink, lost bool) {
	sp := r.spaceOf(l.Namespace)
	sp.mu.Lock()
	ls := sp.links[l]
	delete(sp.links, l)
	if ls != nil {
		ls.out.close()
	}
	var gone []yws.AwarenessEntry
	if r.opts.Hub || !lost {
		gone = r.removeFrom(sp, func(h *held) bool { return h.from.link == l })
		sp.fanOut(gone, nil)
		sp.announce(gone)
	}
	room := sp.room
	sp.mu.Unlock()
	if room != nil && ls != nil && len(gone) > 0 {
		room.RemoveOrigin(ls.origin)
	}
	r.forget(sp)
}

// expireLoop removes the connections' states not renewed within the timeout (this node's
// editors' expire in their room, which publishes the removals).
func (r *Replication) expireLoop(ctx context.Context) {
	defer close(r.done)
	tick := clock.NewTicker(r.opts.Clock, r.opts.Timeout/10)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.mu.Lock()
		spaces := make([]*space, 0, len(r.spaces))
		for _, sp := range r.spaces {
			spaces = append(spaces, sp)
		}
		r.mu.Unlock()
		now := r.opts.Clock.Now()
		for _, sp := range spaces {
			sp.mu.Lock()
			stale := func(h *held) bool { return now.Sub(h.updated) >= r.opts.Timeout }
			peers := r.removeFrom(sp, func(h *held) bool { return h.from.link != nil && stale(h) })
			sp.fanOut(peers, nil)
			sp.announce(peers)
			// The other nodes' expire in the room too (it holds them as well): only the
			// connections hear of these.
			sp.fanOut(r.removeFrom(sp, func(h *held) bool { return h.from.upstream && stale(h) }), nil)
			sp.mu.Unlock()
			r.forget(sp)
		}
	}
}

// ---- the other nodes of the cluster (the upstream's yws.RemoteStates) ----

// upstreamStates is what a space offers its upstream link: the other nodes' states go to
// the connections and to the room; never back upstream.
type upstreamStates struct {
	r  *Replication
	sp *space
}

func (u upstreamStates) Apply(origin yws.Origin, entries []yws.AwarenessEntry) (dropped int) {
	sp := u.sp
	sp.mu.Lock()
	taken, dropped := u.r.apply(sp, party{upstream: true, origin: origin}, entries, u.r.opts.Clock.Now())
	sp.fanOut(taken, nil)
	room := sp.room
	sp.mu.Unlock()
	if room != nil && len(taken) > 0 {
		dropped += room.Apply(origin, taken)
	}
	return dropped
}

func (u upstreamStates) RemoveOrigin(origin yws.Origin) {
	sp := u.sp
	sp.mu.Lock()
	sp.fanOut(u.r.removeFrom(sp, func(h *held) bool { return h.from.upstream && h.from.origin == origin }), nil)
	room := sp.room
	sp.mu.Unlock()
	if room != nil {
		room.RemoveOrigin(origin)
	}
}

// Local returns what this node announces upstream: its editors' and its peers' states.
func (u upstreamStates) Local() []yws.AwarenessEntry {
	sp := u.sp
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var out []yws.AwarenessEntry
	for id, h := range sp.table {
		if h.from.local() {
			out = append(out, yws.AwarenessEntry{ClientID: id, Clock: h.clock, State: h.state})
		}
	}
	return out
}

// toWire converts entries to the protocol's.
func toWire(entries []yws.AwarenessEntry) []protocol.AwarenessEntry {
	out := make([]protocol.AwarenessEntry, len(entries))
	for i, e := range entries {
		out[i] = protocol.AwarenessEntry{ClientID: e.ClientID, Clock: e.Clock, State: e.State}
	}
	return out
}

// awarenessSize is the encoded size of entries, about.
func awarenessSize(entries []yws.AwarenessEntry) int {
	n := 1
	for _, e := range entries {
		n += protocol.AwarenessEntrySize(protocol.AwarenessEntry{State: e.State})
	}
	return n
}

// tokens is a rate limit: rate a second, holding 5 s' worth.
type tokens struct {
	rate, burst, have float64
	last              time.Time
}

func newTokens(rate int, now time.Time) tokens {
	b := float64(rate) * 5
	return tokens{rate: float64(rate), burst: b, have: b, last: now}
}

func (t *tokens) take(now time.Time) bool {
	if now.After(t.last) {
		t.have = min(t.burst, t.have+now.Sub(t.last).Seconds()*t.rate)
		t.last = now
	}
	if t.have < 1 {
		return false
	}
	t.have--
	return true
}
